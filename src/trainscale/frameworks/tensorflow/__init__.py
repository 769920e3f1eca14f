"""trainscale.frameworks.tensorflow: the workloads in TensorFlow 2 with Keras 3.

Every module below imports tensorflow/keras; nothing imports this package unless the user
chose the TensorFlow framework.
"""
