"""
Discrete-time LQR for the shipped controllers: matrix exponential, discretization, Riccati.

Small dense models only (2 to 4 states); no SciPy needed.
"""

import math

import numpy as np


def expm(matrix: np.ndarray) -> np.ndarray:
    """Matrix exponential by scaling and squaring a Taylor series; enough for small models."""
    matrix = np.asarray(matrix, dtype=np.float64)
    norm = float(np.max(np.sum(np.abs(matrix), axis=1))) if matrix.size else 0.0
    squarings = max(0, int(math.ceil(math.log2(norm))) + 1) if norm > 0.5 else 0
    scaled = matrix / 2.0 ** squarings
    result = np.eye(matrix.shape[0])
    term = np.eye(matrix.shape[0])
    for k in range(1, 20):
        term = term @ scaled / k
        result = result + term
    for _ in range(squarings):
        result = result @ result
    return result


def discretize(a: np.ndarray, b: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """
    Zero-order-hold discretisation of ``x' = A x + B u``: the env holds an action for a step.

    :return: ``(Ad, Bd)`` with ``x[k+1] = Ad x[k] + Bd u[k]``.
    """
    n, m = b.shape
    block = np.zeros((n + m, n + m))
    block[:n, :n] = a
    block[:n, n:] = b
    exp = expm(block * dt)
    return exp[:n, :n], exp[:n, n:]


def discrete_lqr(a: np.ndarray, b: np.ndarray, q: np.ndarray, r: np.ndarray, *,
                 max_iterations: int = 100000,
                 tolerance: float = 1e-10) -> tuple[np.ndarray, np.ndarray]:
    """
    Gain of the discrete LQR, by iterating the Riccati equation (no scipy needed).

    :return: ``(K, P)``; the control is ``u = -K x``, ``x' P x`` the optimal cost-to-go.
    """
    p = np.array(q, dtype=np.float64)
    for _ in range(max_iterations):
        gain = np.linalg.solve(r + b.T @ p @ b, b.T @ p @ a)
        updated = q + a.T @ p @ (a - b @ gain)
        updated = 0.5 * (updated + updated.T)
        if np.max(np.abs(updated - p)) <= tolerance * (1.0 + np.max(np.abs(p))):
            p = updated
            break
        p = updated
    else:
        raise ValueError('the Riccati iteration did not converge; '
                         'is the model stabilisable and Q, R positive?')
    gain = np.linalg.solve(r + b.T @ p @ b, b.T @ p @ a)
    return gain, p
