"""(c) Jitted JAX training steps of a bf16 MLP (params kept in f32, cast to bf16 inside:
XLA `convert` fusions), 1024-4096-4096-10, batch 1024, under jax.profiler.trace
(create_perfetto_trace) with a StepTraceAnnotation per step; 4 profiled steps after 3
unprofiled ones. Usage: jax_step.py OUTDIR"""
import sys

import jax
import jax.numpy as jnp

out = sys.argv[1]
ks = jax.random.split(jax.random.PRNGKey(0), 5)
dims = [1024, 4096, 4096, 10]
params = [(jax.random.normal(ks[i], (dims[i], dims[i + 1])) * 0.02, jnp.zeros(dims[i + 1])) for i in range(3)]
x = jax.random.normal(ks[4], (1024, 1024))
y = jax.nn.one_hot(jnp.arange(1024) % 10, 10)


def loss_fn(p, x, y):
    h = x.astype(jnp.bfloat16)
    for i, (w, b) in enumerate(p):
        h = h @ w.astype(jnp.bfloat16) + b.astype(jnp.bfloat16)
        if i < len(p) - 1:
            h = jax.nn.relu(h)
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(h.astype(jnp.float32)) * y, axis=-1))


@jax.jit
def train_step(p, x, y):
    loss, g = jax.value_and_grad(loss_fn)(p, x, y)
    return jax.tree_util.tree_map(lambda a, b: a - 0.01 * b, p, g), loss


for _ in range(3):
    params, loss = train_step(params, x, y)
loss.block_until_ready()
with jax.profiler.trace(out, create_perfetto_trace=True):
    for i in range(4):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            params, loss = train_step(params, x, y)
            loss.block_until_ready()
print("jax devices", jax.devices(), "loss", float(loss), "jax", jax.__version__)
