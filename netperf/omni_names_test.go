package netperf

import (
	"slices"
	"strings"
	"testing"
)

// TestOmniNamesComplete checks that this client prints exactly the output
// names of nettest_omni.c's enum netperf_output_name (175, OUTPUT_NONE to
// OUTPUT_END, the order "-o ?" lists), that "-o ?" lists them comma-
// separated and "-O ?" one a line, and that "all" selects
// set_output_list_all's four blocks. Planted bugs, each caught: an output
// dropped from the table (REMOTE_FILL_FILE); "all"'s third block starting
// at LOCAL_SEND_CALLS instead of LOCAL_SEND_THROUGHPUT.
func TestOmniNamesComplete(t *testing.T) {
	if len(omniOutputOrder) != 175 {
		t.Errorf("%d names in the enum order, want 175", len(omniOutputOrder))
	}
	for _, n := range omniOutputOrder {
		if _, ok := omniOutputs[n]; !ok {
			t.Errorf("%s: in stock's enum, not printed here", n)
		}
	}
	for n := range omniOutputs {
		if !slices.Contains(omniOutputOrder, n) {
			t.Errorf("%s: printed here, not a stock output name", n)
		}
	}
	var csv, lines strings.Builder
	_ = WriteOmniChoices(&csv, OmniCSV)
	_ = WriteOmniChoices(&lines, OmniHuman)
	if !strings.HasPrefix(csv.String(), "OUTPUT_NONE,SOCKET_TYPE,PROTOCOL,") || !strings.HasSuffix(csv.String(), ",COMMAND_LINE,OUTPUT_END\n") {
		t.Errorf("-o ?: %q", csv.String())
	}
	if strings.Count(lines.String(), "\n") != 175 {
		t.Errorf("-O ?: %d lines", strings.Count(lines.String(), "\n"))
	}
	blocks := parseSelection(allOmniSelection())
	want := [][2]string{{"SOCKET_TYPE", "RESPONSE_SIZE"}, {"LOCAL_CPU_UTIL", "TRANSPORT_MSS"}, {"LOCAL_SEND_THROUGHPUT", "REMOTE_CORK"}, {"LOCAL_SYSNAME", "COMMAND_LINE"}}
	if len(blocks) != 4 {
		t.Fatalf("all: %d blocks", len(blocks))
	}
	for i, b := range blocks {
		if b[0] != want[i][0] || b[len(b)-1] != want[i][1] {
			t.Errorf("all, block %d: %s..%s, want %s..%s", i+1, b[0], b[len(b)-1], want[i][0], want[i][1])
		}
	}
	// The four spans are contiguous in the enum: everything but
	// OUTPUT_NONE and OUTPUT_END.
	if n := len(blocks[0]) + len(blocks[1]) + len(blocks[2]) + len(blocks[3]); n != 173 {
		t.Errorf("all selects %d outputs, want 173", n)
	}
}
