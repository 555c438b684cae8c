"""pgharness: throwaway PostgreSQL clusters for directpath's tests and benchmarks.

One package for what tests/conftest.py and bench/dpbench both need:

  proc     running commands, free ports, whether a pid lives, HarnessError
  user     the unprivileged user servers run as when we are root
  build    provisioning a PostgreSQL major, building and installing directpath
  cluster  Cluster: initdb, configure, start/stop (pg_ctl on its own data
           directory, or its own postmaster pid), streaming standbys
  sql      query helpers: the seed table, last_statement(), LSNs, VM, leaves

Policy (which settings a test or a benchmark wants, what counts as a
failure) stays with the callers.
"""
