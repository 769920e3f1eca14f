"""trainscale.frameworks: training the workloads in frameworks other than PyTorch."""
