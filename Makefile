# directpath: PGXS build.
#
#   make [PG_CONFIG=...]            build against that PostgreSQL (default: the
#                                   embedded 18 in .pg/18, provisioned by
#                                   scripts/provision.sh)
#   make install                    install into that PostgreSQL
#   make installcheck               pg_regress suites on a throwaway instance
#
# The pytest harness and the full matrix run from scripts/test.sh.

MODULE_big = directpath
OBJS = \
	src/directpath.o \
	src/common/settings.o \
	src/common/fault.o \
	src/common/report.o \
	src/common/progress.o \
	src/common/radix.o \
	src/statement/plan.o \
	src/statement/exec.o \
	src/statement/copy.o \
	src/statement/copyopts.o \
	src/statement/born.o \
	src/admission/hint.o \
	src/admission/eligibility.o \
	src/admission/existing.o \
	src/admission/admission.o \
	src/load/load.o \
	src/load/place.o \
	src/load/decide.o \
	src/load/finish.o \
	src/load/leaf.o \
	src/load/queue.o \
	src/load/foreign.o \
	src/load/fkahead.o \
	src/load/fkeys.o \
	src/load/fkfind.o \
	src/load/fklock.o \
	src/load/fkset.o \
	src/load/rejects.o \
	src/load/conflict.o \
	src/load/keyimage.o \
	src/load/upsert.o \
	src/load/versions.o \
	src/load/oldpages.o \
	src/load/rewrite.o \
	src/load/bulkrules.o \
	src/load/newvalues.o \
	src/remote/shard.o \
	src/remote/shardcommit.o \
	src/remote/copyenc.o \
	src/remote/fdwconn.o \
	src/parallel/parallel.o \
	src/parallel/parcheck.o \
	src/parallel/parmsg.o \
	src/parallel/parorder.o \
	src/parallel/parconflict.o \
	src/parallel/parkeys.o \
	src/parallel/parscan.o \
	src/parallel/parplan.o \
	src/parallel/pargather.o \
	src/parallel/parcopy.o \
	src/parallel/placer.o \
	src/input/chunker.o \
	src/input/rowform.o \
	src/input/rowsplit.o \
	src/input/rowvalues.o \
	src/input/scan.o \
	src/input/fastin.o \
	src/input/fasttime.o \
	src/input/fastnum.o \
	src/input/fasttext.o \
	src/input/fastbin.o \
	src/index/indexes.o \
	src/index/entry.o \
	src/index/sorted.o \
	src/index/rebuild.o \
	src/index/btree.o \
	src/index/keysort.o \
	src/index/btappend.o \
	src/index/btrun.o \
	src/index/btchunk.o \
	src/index/btmerge.o \
	src/index/btprobe.o \
	src/index/brin.o \
	src/heap/pages.o \
	src/heap/append.o \
	src/heap/shared.o \
	src/heap/wal.o \
	src/heap/visibility.o \
	src/stats/stats.o \
	src/stats/sample.o \
	src/stats/store.o

EXTENSION = directpath
DATA = $(notdir $(wildcard $(srcdir)/directpath--*.sql))
PGFILEDESC = "directpath - direct path INSERT for PostgreSQL"

REGRESS = hint eligibility semantics partition triggers indexes btappend brin fkeys freeze faults copy rejects foreign parallel parcopy parpart keysort
# pg_regress starts its own instance, with the library preloaded.
REGRESS_OPTS = --temp-instance=tmp_check --temp-config=$(srcdir)/tests/regress.conf \
	--outputdir=$(REGRESS_OUTPUTDIR)
REGRESS_OUTPUTDIR ?= .

PG_CPPFLAGS = -I$(srcdir)/src -I$(libpq_srcdir)
# remote/shard.c speaks libpq on postgres_fdw's connections
SHLIB_LINK_INTERNAL = $(libpq)
# a missing declaration links against a macro that does not exist on 15/16
PG_CFLAGS = -Werror=implicit-function-declaration

ifndef PG_CONFIG
PG_CONFIG := $(firstword $(wildcard $(dir $(lastword $(MAKEFILE_LIST))).pg/18/bin/pg_config) pg_config)
endif
PGXS := $(shell $(PG_CONFIG) --pgxs)

# Suites for options that only newer majors have.
PG_MAJOR := $(shell $(PG_CONFIG) --version | sed 's/^PostgreSQL \([0-9]*\).*/\1/')
ifeq ($(shell test $(PG_MAJOR) -ge 16 && echo yes),yes)
REGRESS += copy16
endif
ifeq ($(shell test $(PG_MAJOR) -ge 17 && echo yes),yes)
REGRESS += copy17
endif

include $(PGXS)

# A VPATH build (pg_buildext: make -C build-<major> -f ../Makefile VPATH=..):
# PGXS makes no directory for an object file, so make them here.
ifneq ($(srcdir),.)
$(shell mkdir -p $(sort $(dir $(OBJS))))
endif

# Benchmarks (not tests): bench/run.py, all scenarios or one (bench-wal: scenario wal,
# bench-indexes: scenario indexes); reports in bench/results/.
.PHONY: bench bench-quick bench-wal bench-indexes
bench:
	$(srcdir)/scripts/setup-python.sh
	$(srcdir)/.venv/bin/python $(srcdir)/bench/run.py $(BENCH_ARGS)
bench-quick:
	$(srcdir)/scripts/setup-python.sh
	$(srcdir)/.venv/bin/python $(srcdir)/bench/run.py --quick $(BENCH_ARGS)
bench-wal:
	$(srcdir)/scripts/setup-python.sh
	$(srcdir)/.venv/bin/python $(srcdir)/bench/run.py --only wal $(BENCH_ARGS)
bench-indexes:
	$(srcdir)/scripts/setup-python.sh
	$(srcdir)/.venv/bin/python $(srcdir)/bench/run.py --only indexes $(BENCH_ARGS)

# The source files' call graph; fails on a cycle or a function over 60 lines
# without a reason written above it.
.PHONY: callgraph
callgraph:
	python3 $(srcdir)/scripts/callgraph.py $(srcdir)/src
