import numpy as np


def reference(rows, cols, x, y):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    y[:] = e / e.sum(axis=1, keepdims=True)
