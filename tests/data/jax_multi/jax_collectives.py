"""A jitted data-parallel JAX step on 2 GPUs of one host whose XLA program carries the
four collectives XLA lowers to NCCL: the gradients' all-reduce (psum), an all-gather of
a sharded weight, a reduce-scatter (psum_scatter) and a collective-permute (ppermute),
written with shard_map over a 2-device mesh; bf16 MLP 2048-4096-4096-16, batch 2048 per
device; 4 profiled steps (StepTraceAnnotation) after 3 unprofiled, jax.profiler.trace
with create_perfetto_trace. Usage: jax_collectives.py OUTDIR"""
import sys
from functools import partial

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, PartitionSpec as P
try:
    from jax import shard_map
except ImportError:
    from jax.experimental.shard_map import shard_map

out = sys.argv[1]
n = jax.device_count()
mesh = Mesh(jax.devices(), ("d",))
ks = jax.random.split(jax.random.PRNGKey(0), 5)
dims = [2048, 4096, 4096, 16]
params = [(jax.random.normal(ks[i], (dims[i], dims[i + 1])) * 0.02, jnp.zeros(dims[i + 1])) for i in range(3)]
x = jax.random.normal(ks[3], (2048 * n, 2048))
y = jax.nn.one_hot(jnp.arange(2048 * n) % 16, 16)
w_shard = jax.random.normal(ks[4], (4096, 4096)) * 0.02     # sharded over rows: all-gathered in the step


def loss_fn(p, wfull, x, y):
    h = x.astype(jnp.bfloat16)
    for i, (w, b) in enumerate(p):
        h = h @ w.astype(jnp.bfloat16) + b.astype(jnp.bfloat16)
        if i == 1:
            h = h + 1e-3 * (h @ wfull.astype(jnp.bfloat16))
        if i < len(p) - 1:
            h = jax.nn.relu(h)
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(h.astype(jnp.float32)) * y, axis=-1))


@jax.jit
@partial(shard_map, mesh=mesh, in_specs=(P(), P("d"), P("d"), P("d")), out_specs=(P(), P("d"), P()))
def train_step(p, wpart, x, y):
    wfull = jax.lax.all_gather(wpart, "d", tiled=True)                  # all-gather
    loss, g = jax.value_and_grad(loss_fn)(p, wfull, x, y)
    g = jax.lax.psum(g, "d")                                            # all-reduce
    p = jax.tree_util.tree_map(lambda a, b: a - 0.01 * b / n, p, g)
    act = jax.lax.psum_scatter(jnp.tile(x[:, :1024], (1, 1)), "d", scatter_dimension=0, tiled=True)  # reduce-scatter
    ring = jax.lax.ppermute(act, "d", [(i, (i + 1) % n) for i in range(n)])                          # collective-permute
    return p, wpart + 1e-6 * jnp.sum(ring), jax.lax.pmean(loss, "d")


wpart = jax.device_put(w_shard)
for _ in range(3):
    params, wpart, loss = train_step(params, wpart, x, y)
loss.block_until_ready()
with jax.profiler.trace(out, create_perfetto_trace=True):
    for i in range(4):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            params, wpart, loss = train_step(params, wpart, x, y)
            loss.block_until_ready()
print("jax devices", jax.devices(), "loss", float(loss), "jax", jax.__version__)
