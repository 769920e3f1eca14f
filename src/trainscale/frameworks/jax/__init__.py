"""JAX (flax.linen, optax) twins of the reference models, and the DBN's CD pre-training.

Imports jax and flax: only the JAX trainer and its tests import this package.
"""
