"""Training in other frameworks than PyTorch: TensorFlow/Keras and JAX twins of the workloads."""
