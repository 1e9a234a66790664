import numpy as np

import stdlib_ops as ops

rng = np.random.default_rng(0)
w1 = ops.asarray(rng.standard_normal((64, 128)).astype(np.float32) / 8)
b1 = ops.asarray(rng.standard_normal(128).astype(np.float32))
w2 = ops.asarray(rng.standard_normal((128, 32)).astype(np.float32) / 8)

x = ops.symbol(["batch", 64], dtype="float32")
hidden = ops.relu(ops.matmul(x, w1) + b1)
out = ops.softmax(ops.matmul(hidden, w2), axis=-1)
graph = ops.optimize(ops.trace_from(out, inputs=[x]))
