"""What tests share that is not a fixture (fixtures are in tests/conftest.py).

- `tiny`: a tiny workload, its data and resolved configs (train in milliseconds on a CPU).
- `real_data`: where the real datasets are for the real-data tests.
- `cli`: run `trainscale` in-process (`run_cli`) and read its one error line.
- `mnist_files`, `cifar_files`, `text_files`: small dataset files in the release formats.
- `trainer_output`: run summaries as the trainer writes them, with a fixture's figures set.
- `report_store`, `simulate`: small results stores for the report and simulator tests (and
  the simulator's hand-made calibrations, clusters and gradient layouts).
- `sweeps`: a stand-in for the sweep's run function that records runs as the real one does.
- `http_servers`: local HTTP servers the loaders' downloads are tested against.
"""
