package node

import (
	"net/http"
	"runtime"
	"runtime/pprof"
)

// heapProfile serves the node's heap profile (go tool pprof reads it) at
// GET /debug/pprof/heap beside /metrics: what the node's memory is made
// of, by allocation site (the BGP scale bench splits it into GoBGP's RIB,
// the node's tables, the FIB and the XDP mirror). ?gc=1 runs a garbage
// collection first, so that in-use figures count live objects only. It
// changes nothing in the node.
func heapProfile(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("gc") == "1" {
		runtime.GC()
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_ = pprof.Lookup("heap").WriteTo(w, 0)
}
