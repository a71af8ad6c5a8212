"""Capture tests/data/jax/: an XProf trace of jitted JAX training steps on a GPU.

Usage: python3 jax_mlp_step.py OUTDIR. Writes OUTDIR/plugins/profile/<run>/
(*.xplane.pb and perfetto_trace.json.gz, made by jax.profiler itself)."""
import sys

import jax
import jax.numpy as jnp

out = sys.argv[1]
k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
params = {"w1": jax.random.normal(k1, (784, 512)) * 0.02, "b1": jnp.zeros(512),
          "w2": jax.random.normal(k2, (512, 10)) * 0.02, "b2": jnp.zeros(10)}
x = jax.random.normal(k3, (256, 784))
y = jax.nn.one_hot(jnp.arange(256) % 10, 10)


def loss_fn(p, x, y):
    h = jax.nn.relu(x @ p["w1"] + p["b1"])
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(h @ p["w2"] + p["b2"]) * y, axis=-1))


@jax.jit
def train_step(p, x, y):
    loss, g = jax.value_and_grad(loss_fn)(p, x, y)
    return jax.tree_util.tree_map(lambda a, b: a - 0.01 * b, p, g), loss


for _ in range(3):
    params, loss = train_step(params, x, y)
loss.block_until_ready()
with jax.profiler.trace(out, create_perfetto_trace=True):
    for i in range(2):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            params, loss = train_step(params, x, y)
            loss.block_until_ready()
print("devices", jax.devices(), "loss", float(loss))
