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

.PHONY: all build test bench demo fuzz lint deps clean

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

# bench runs the Go benchmarks (the seed-topology bench lands with bench/).
bench: deps
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...

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

lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt -l:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@test -x $(GOBIN)/staticcheck || $(GO) install $(STATICCHECK)
	$(GOBIN)/staticcheck ./...

clean:
	rm -rf bin
