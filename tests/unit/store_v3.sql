-- A results store written by trainscale with schema version 3 (before run owners were
-- recorded), dumped with sqlite3's iterdump: a completed run of a sweep, a run left
-- 'running', a failed run and a probe.
BEGIN TRANSACTION;
CREATE TABLE epochs (
        run_id        TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        epoch         INTEGER NOT NULL,
        train_loss    REAL,
        test_loss     REAL,
        test_accuracy REAL,
        train_clock_s REAL,
        epoch_time_s  REAL,
        eval_time_s   REAL,
        PRIMARY KEY (run_id, epoch)
    );
INSERT INTO "epochs" VALUES('completed-v3',1,0.5,NULL,NULL,NULL,NULL,NULL);
CREATE TABLE meta (
        key   TEXT PRIMARY KEY,
        value TEXT
    );
INSERT INTO "meta" VALUES('schema_version','3');
CREATE TABLE probes (
        probe_id       TEXT PRIMARY KEY,
        created_at     TEXT NOT NULL,
        kind           TEXT NOT NULL,
        host           TEXT,
        device_type    TEXT,
        device         TEXT,
        workers        INTEGER,
        result_json    TEXT NOT NULL DEFAULT '{}',
        env_json       TEXT NOT NULL DEFAULT '{}',
        schema_version INTEGER NOT NULL
    );
INSERT INTO "probes" VALUES('10d25f58fcc3497e9cf638f90b027f3e','2026-11-23T17:10:09.324317+00:00','matmul','old-host','cpu','Old CPU',NULL,'{"flops_per_s": 1000000000.0}','{}',3);
CREATE TABLE runs (
        run_id             TEXT PRIMARY KEY,
        created_at         TEXT NOT NULL,
        finished_at        TEXT,
        status             TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
        error              TEXT,
        workload           TEXT,
        data_kind          TEXT CHECK (data_kind IN ('real', 'synthetic')),
        world_size         INTEGER,
        threads_per_worker INTEGER,
        affinity           TEXT,
        precision          TEXT,
        global_batch_size  INTEGER,
        tag                TEXT,
        config_json        TEXT NOT NULL DEFAULT '{}',
        env_json           TEXT NOT NULL DEFAULT '{}',
        summary_json       TEXT NOT NULL DEFAULT '{}',
        schema_version     INTEGER NOT NULL,
        sweep_id TEXT,
        sweep_item INTEGER,
        config_hash TEXT,
        repeat_index INTEGER
    );
INSERT INTO "runs" VALUES('completed-v3','2026-11-23T17:10:09.312145+00:00','2026-11-23T17:10:09.316487+00:00','completed',NULL,'mnist-cnn','synthetic',2,1,'none','fp32',16,'old','{"workload": "mnist-cnn"}','{"hostname": "old-host"}','{"samples_per_s": 321.0}',3,'sweep-v3',0,'cfg-a',0);
INSERT INTO "runs" VALUES('running-v3','2026-11-23T17:10:09.317971+00:00',NULL,'running',NULL,'mnist-cnn','synthetic',2,1,'none','fp32',16,NULL,'{"workload": "mnist-cnn"}','{"hostname": "old-host"}','{}',3,NULL,NULL,NULL,NULL);
INSERT INTO "runs" VALUES('failed-v3','2026-11-23T17:10:09.318613+00:00','2026-11-23T17:10:09.319122+00:00','failed','worker rank 1 failed: injected','mnist-cnn','synthetic',2,1,'none','fp32',16,NULL,'{"workload": "mnist-cnn"}','{"hostname": "old-host"}','{}',3,NULL,NULL,NULL,NULL);
CREATE TABLE step_times (
        run_id      TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        step        INTEGER NOT NULL,
        step_time_s REAL NOT NULL,
        PRIMARY KEY (run_id, step)
    );
INSERT INTO "step_times" VALUES('completed-v3',0,0.1);
INSERT INTO "step_times" VALUES('completed-v3',1,0.2);
INSERT INTO "step_times" VALUES('completed-v3',2,0.3);
CREATE TABLE sweeps (
        sweep_id   TEXT PRIMARY KEY,
        name       TEXT NOT NULL,
        created_at TEXT NOT NULL,
        source     TEXT NOT NULL,
        spec_hash  TEXT NOT NULL,
        spec_json  TEXT NOT NULL,
        plan_json  TEXT NOT NULL
    );
INSERT INTO "sweeps" VALUES('sweep-v3','old','2026-11-23T17:10:09.309463+00:00','old.toml','hash-old','{"base": {}}','[{"config_hash": "cfg-a", "item": 0, "label": "seed=0", "options": {}, "repeat": 0}]');
CREATE INDEX runs_workload ON runs (workload);
CREATE INDEX runs_created_at ON runs (created_at);
CREATE INDEX runs_tag ON runs (tag);
CREATE INDEX runs_sweep ON runs (sweep_id, sweep_item);
CREATE INDEX probes_lookup ON probes (kind, host, device, created_at);
COMMIT;
