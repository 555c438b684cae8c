"""Published figures the report shows beside ours.

SEED_*: the five seed experiments, as published (docs/baseline.md; other
machines, other versions: compare ratios and per-row figures, not seconds).
BASELINE: docs/baseline.md, measured on this VM type with the same
settings, N = 10,000,000 rows (pgbench -s 50, postgres_fdw 1,000,000 rows).
"""

MB = 1024 * 1024

# seed 000: PostgreSQL 14.3, 50,000,000 rows of the seed table, psql \timing
SEED_000 = {
    "version": "PostgreSQL 14.3 (pg_directpaths)",
    "rows": 50_000_000,
    "plain_s": 111.759, "plain_wal_mb": 3443,
    "direct_s": 56.424, "direct_wal_mb": 2114,
    "table_mb": 2111,
}

# seed 001: pgbench -s 100, 4 clients / 4 threads, 300 s, prepared
SEED_001 = {
    "version": "PostgreSQL 9.x era pgbench (\"tps ... including connections establishing\")",
    "scale": 100, "clients": 4, "duration_s": 300,
    "update_tps": 5186.17, "update_latency_ms": 0.771,
    "insert_only_tps": 7427.37, "insert_only_latency_ms": 0.539,
    "tps_gain": "+43%", "wal_difference": "+135% (more WAL on the UPDATE side)",
}

# seed 002: pgbench -i -s 100 on a laptop, before/after pgbench used COPY FREEZE
SEED_002 = {
    "version": "PostgreSQL 14 development",
    "scale": 100,
    "before": {"total_s": 70.78, "drop tables": 0.21, "create tables": 0.02,
               "client-side generate": 12.42, "vacuum": 51.11, "primary keys": 7.02},
    "after": {"total_s": 16.86, "vacuum": 0.25},
}

# seed 003: PostgreSQL 11.0, 6 clients / 1 thread, 120 s, simple protocol.
# recheck_on_update=on could keep the UPDATE HOT (like our noexpr_idx);
# off is what every release since 11.1 does (like our expr_idx).
SEED_003 = {
    "version": "PostgreSQL 11.0",
    "clients": 6, "duration_s": 120,
    "on": {  # autovacuum
        "recheck_on": {"tps": 22859.6, "table_kb": 376, "c2_idx_kb": 16, "expr_idx_kb": 32,
                       "hot": 7998236, "upd": 7999055},
        "recheck_off": {"tps": 8880.7, "table_kb": 9496, "c2_idx_kb": 768,
                        "expr_idx_kb": 58 * 1024, "hot": 19, "upd": 2131376},
    },
    "off": {
        "recheck_on": {"tps": 22937.3, "table_kb": 1080, "c2_idx_kb": 16, "expr_idx_kb": 40,
                       "hot": 5504258, "upd": 5504958},
        "recheck_off": {"tps": 7345.2, "table_kb": 55 * 1024, "c2_idx_kb": 600,
                        "expr_idx_kb": 56 * 1024, "hot": 23, "upd": 1762868},
    },
}

# seed 004: PostgreSQL 14 development, 1,000,000 rows (id int pk, text), same host
SEED_004 = {
    "version": "PostgreSQL 14 development",
    "rows": 1_000_000,
    "local_s": 6.1, "fdw_b1_s": 125.3, "fdw_b100_s": 11.1,
    "part_local_s": 8.6, "part_fdw_b1_s": 113.7, "part_fdw_b100_s": 12.5,
    "partitions": "8 hash partitions, all foreign",
}

# baseline.md: (major, phase, case id) -> figures at 10 M rows.
# load_s / ckpt_s medians; wal_mb; vac_s / vac_wal_mb for VACUUM (FREEZE)
# after a checkpoint.  "≈" marks where the baseline's statement differs
# slightly from ours (CREATE vs TRUNCATE in the transaction).
BASELINE_ROWS = 10_000_000
BASELINE = {
    (18, "replica", "rows_only"): {"load_s": 0.91, "wal_mb": 0.0},
    (18, "replica", "plain_existing_none"): {"load_s": 4.93, "ckpt_s": 0.32, "wal_mb": 688.7,
                                             "vac_s": 0.81, "vac_wal_mb": 450.9},
    (18, "replica", "plain_created_none"): {"load_s": 4.88, "ckpt_s": 0.30, "wal_mb": 688.8},
    (18, "replica", "plain_unlogged"): {"load_s": 3.08, "ckpt_s": 0.12, "wal_mb": 0.0},
    (18, "replica", "ctas"): {"load_s": 4.00, "ckpt_s": 0.18, "wal_mb": 688.8, "vac_s": 0.96,
                              "vac_wal_mb": 450.9},
    (18, "replica", "plain_existing_unique"): {"load_s": 16.05, "ckpt_s": 0.61, "wal_mb": 1408.2},
    (18, "replica", "copy"): {"load_s": 2.44, "ckpt_s": 0.21, "wal_mb": 234.8, "vac_s": 0.97,
                              "vac_wal_mb": 450.9},
    (18, "replica", "copy_freeze"): {"load_s": 2.64, "ckpt_s": 0.23, "wal_mb": 238.0,
                                     "vac_s": 0.0, "vac_wal_mb": 0.0},
    (18, "minimal", "plain_existing_none"): {"load_s": 5.27, "ckpt_s": 0.36, "wal_mb": 688.7,
                                             "vac_s": 1.19, "vac_wal_mb": 450.9},
    (18, "minimal", "plain_created_none"): {"load_s": 3.49, "ckpt_s": 0.01, "wal_mb": 0.1,
                                            "vac_s": 1.01, "vac_wal_mb": 450.9},
    (18, "minimal", "ctas"): {"load_s": 2.63, "ckpt_s": 0.01, "wal_mb": 0.1, "vac_s": 1.02,
                              "vac_wal_mb": 450.9},
    (18, "minimal", "copy"): {"load_s": 2.56, "ckpt_s": 0.21, "wal_mb": 234.8, "vac_s": 0.98,
                              "vac_wal_mb": 450.9},
    (18, "minimal", "copy_truncated"): {"load_s": 2.50, "ckpt_s": 0.01, "wal_mb": 0.1,
                                        "approx": True},
    (18, "minimal", "copy_freeze"): {"load_s": 2.64, "ckpt_s": 0.01, "wal_mb": 0.1, "vac_s": 0.0,
                                     "vac_wal_mb": 0.0, "approx": True},
    (15, "replica", "rows_only"): {"load_s": 0.99, "wal_mb": 0.0},
    (15, "replica", "plain_existing_none"): {"load_s": 5.69, "ckpt_s": 0.33, "wal_mb": 688.7,
                                             "vac_s": 0.97, "vac_wal_mb": 545.6},
    (15, "replica", "plain_created_none"): {"load_s": 5.36, "ckpt_s": 0.32, "wal_mb": 688.8},
    (15, "replica", "plain_unlogged"): {"load_s": 3.42, "ckpt_s": 0.18, "wal_mb": 0.0},
    (15, "replica", "ctas"): {"load_s": 4.28, "ckpt_s": 0.18, "wal_mb": 688.8, "vac_s": 1.27,
                              "vac_wal_mb": 545.6},
    (15, "replica", "plain_existing_unique"): {"load_s": 16.93, "ckpt_s": 0.57, "wal_mb": 1408.2},
    (15, "replica", "copy"): {"load_s": 2.88, "ckpt_s": 0.23, "wal_mb": 234.7, "vac_s": 1.30,
                              "vac_wal_mb": 545.6},
    (15, "replica", "copy_freeze"): {"load_s": 2.93, "ckpt_s": 0.22, "wal_mb": 238.0,
                                     "vac_s": 0.0, "vac_wal_mb": 0.0},
    (15, "minimal", "plain_existing_none"): {"load_s": 5.52, "ckpt_s": 0.32, "wal_mb": 688.7,
                                             "vac_s": 1.18, "vac_wal_mb": 545.6},
    (15, "minimal", "plain_created_none"): {"load_s": 3.72, "ckpt_s": 0.01, "wal_mb": 0.1,
                                            "vac_s": 1.17, "vac_wal_mb": 545.6},
    (15, "minimal", "ctas"): {"load_s": 2.94, "ckpt_s": 0.01, "wal_mb": 0.1, "vac_s": 1.33,
                              "vac_wal_mb": 545.6},
    (15, "minimal", "copy"): {"load_s": 2.91, "ckpt_s": 0.19, "wal_mb": 234.7, "vac_s": 1.31,
                              "vac_wal_mb": 545.6},
    (15, "minimal", "copy_truncated"): {"load_s": 2.79, "ckpt_s": 0.01, "wal_mb": 0.1,
                                        "approx": True},
    (15, "minimal", "copy_freeze"): {"load_s": 2.84, "ckpt_s": 0.01, "wal_mb": 0.1, "vac_s": 0.0,
                                     "vac_wal_mb": 0.0, "approx": True},
}

# baseline.md section 7: pgbench -i -s 50
BASELINE_PGBENCH_SCALE = 50
BASELINE_PGBENCH = {
    (18, "pgbench_i"): {"total_s": 3.46, "generate_s": 2.28, "vacuum_s": 0.13, "pkeys_s": 1.12,
                        "wal_mb": 614.0, "vm": "81,968 / 81,968"},
    (18, "pgbench_i_G"): {"total_s": 4.98, "generate_s": 3.65, "vacuum_s": 0.37, "pkeys_s": 0.89,
                          "wal_mb": 829.3, "vm": "81,968 / 0"},
    (15, "pgbench_i"): {"total_s": 4.12, "generate_s": 2.82, "vacuum_s": 0.19, "pkeys_s": 1.11,
                        "wal_mb": 614.5, "vm": "81,968 / 81,968"},
    (15, "pgbench_i_G"): {"total_s": 5.56, "generate_s": 4.07, "vacuum_s": 0.40, "pkeys_s": 1.14,
                          "wal_mb": 829.8, "vm": "81,968 / 0"},
}

# baseline.md section 7: postgres_fdw, PG 18, 1,000,000 rows, rows/s
BASELINE_FDW = {"local_plain": 715246, "ft_b1": 13483, "ft_b10": 104213, "ft_b100": 328563,
                "ft_b1000": 487624}
