# mplsnode: the two commands are `make demo` and `make test`.
# Every target installs what it needs (scripts/deps.sh) so a fresh machine works.

GO          ?= go
GOBIN       := $(shell $(GO) env GOPATH)/bin
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
# Bounded fuzzing: each target runs this long under `make fuzz`.
FUZZTIME    ?= 20s
BENCHTIME   ?= 1s
# The whole suite stays well under CI's budget; the timeout is a backstop.
TESTTIMEOUT ?= 25m

.PHONY: all build test bench gobench demo fuzz soak lint deps clean mutate gremlins bpf

all: build

deps:
	@scripts/deps.sh

build:
	$(GO) build ./...
	$(GO) build -o bin/mplsnode ./cmd/mplsnode

# test runs every test; the network-namespace tests run when root (CI is
# root) and skip with the reason otherwise.
test: deps
	$(GO) test -count=1 -timeout $(TESTTIMEOUT) ./...

# gobench runs the Go micro-benchmarks (label codec, segmenter, endpoint,
# label switch).
gobench: deps
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...

# bench builds the seed topology and runs every configuration side by side
# in one run (bench/README.md); BENCHFLAGS passes options, e.g.
# BENCHFLAGS='-rounds 1 -seconds 3' for a quick look.
BENCHFLAGS ?=
bench: deps build
	$(GO) run ./bench/cmd/seedbench $(BENCHFLAGS)
	$(GO) run ./bench/cmd/routescale
	$(GO) run ./bench/cmd/rrload -bin bin/mplsnode
	$(GO) run ./bench/cmd/bgpscale -bin bin/mplsnode

demo: deps build
	@scripts/demo.sh

# fuzz runs each fuzz target for FUZZTIME (go test -fuzz takes one target at a time).
fuzz:
	@set -e; for f in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
		for t in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$f/*_test.go | sed 's/^func //'); do \
			echo "fuzz $$f $$t ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$f || exit 1; \
		done; \
	done

# soak runs labelled TCP through the seed topology for SOAKTIME with
# periodic new connections, sampling RSS and goroutines (CI runs a short one
# inside make test).
SOAKTIME ?= 5m
soak: deps
	MPLSNODE_SOAK=$(SOAKTIME) $(GO) test -count=1 -v -timeout 0 -run '^TestSoak$$' ./cmd/mplsnode

lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt -l:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@test -x $(GOBIN)/staticcheck || $(GO) install $(STATICCHECK)
	$(GOBIN)/staticcheck ./...

# mutate plants each bug of scripts/mutants.tsv in turn and reports it
# killed, survived, invalid or stale (docs/TESTING.md); MUTANTS_IDS='s02 s07'
# runs a few.
MUTANTS_IDS ?=
mutate:
	@scripts/mutate.sh $(MUTANTS_IDS)

# gremlins runs the mutation tool over MUTATE_PKGS (slow: every mutant
# rebuilds and runs its package's tests; not in CI). Add a package to the
# list to cover it; forward/ joins once it exists. Its per-mutant timeout is
# the coverage run's time times the coefficient: the default (3) leaves no
# room for the rebuild and times out nearly every mutant of a fast package.
GREMLINS      := github.com/go-gremlins/gremlins/cmd/gremlins@v0.6.0
MUTATE_PKGS   ?= ./gso ./mpls ./link/mplsendpoint $(if $(wildcard forward),./forward)
GREMLINSFLAGS ?= --timeout-coefficient 20
gremlins:
	@test -x $(GOBIN)/gremlins || $(GO) install $(GREMLINS)
	@set -e; for p in $(MUTATE_PKGS); do echo "gremlins $$p"; $(GOBIN)/gremlins unleash $(GREMLINSFLAGS) $$p; done

clean:
	rm -rf bin

# bpf regenerates forward/xdp's BPF object and Go loader from
# forward/xdp/bpf/lsr.c, and bench/lsrrate's generator and sink from
# bench/lsrrate/bpf/trafficgen.c (bpf2go; needs clang and libbpf-dev). Both are
# committed, so build and test need no C compiler.
bpf:
	@scripts/deps.sh bpf
	$(GO) generate ./forward/xdp
	$(GO) generate ./bench/lsrrate

# race runs the race detector over RACEPKGS: the packages whose tests run
# goroutines over shared buffers (links' receive and send loops, ring close
# while busy, the forwarding plane, the stack, netperf) and the pure ones.
# node/ and cmd/ are left out: their namespace tests take many minutes
# under -race on 2 cores (run one with RACEPKGS=./node RACEFLAGS='-run X').
RACEPKGS  ?= ./mpls ./gso ./mplstest ./link/... ./forward/... ./stack ./netperf
RACEFLAGS ?=
.PHONY: race
race: deps
	$(GO) test -race -count=1 -timeout $(TESTTIMEOUT) $(RACEFLAGS) $(RACEPKGS)
