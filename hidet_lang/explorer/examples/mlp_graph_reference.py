import numpy as np

# the reference sees the program's names: the weights w1, b1 and w2


def reference(x):
    h = np.maximum(x @ w1.numpy() + b1.numpy(), 0)  # noqa: F821 (the program's)
    z = h @ w2.numpy()  # noqa: F821 (the program's)
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
