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

// TestSelectionFromFile checks an output selection file as stock's
// parse_output_selection_file and match_string_to_output read it: a block
// per line (four at most), names or header texts matched case-blind and
// verbatim (a leading space spoils a match), the first match in stock's
// order winning (REMOTE_SECURITY_ENABLED_NUM's header equals
// REMOTE_SECURITY_ENABLED's, and comes first), anything else and a blank
// line OUTPUT_NONE; and which words name a file at all. Planted bugs,
// each caught: entries trimmed of spaces (" ELAPSED_TIME" matching);
// a fifth line read.
func TestSelectionFromFile(t *testing.T) {
	got := SelectionFromFile("throughput,Throughput Units, ELAPSED_TIME\r\n\nlocal send size,Remote OS Security Enabled\nNOPE\nPROTOCOL\n")
	want := "THROUGHPUT,THROUGHPUT_UNITS,OUTPUT_NONE;OUTPUT_NONE;LOCAL_SEND_SIZE,REMOTE_SECURITY_ENABLED_NUM;OUTPUT_NONE"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got := SelectionFromFile("MIN_LATENCY,max_latency"); got != "MIN_LATENCY,MAX_LATENCY" {
		t.Errorf("no final newline: %q", got)
	}
	if got := SelectionFromFile(""); got != "OUTPUT_END" {
		t.Errorf("empty file: %q", got)
	}
	for sel, file := range map[string]bool{"THROUGHPUT": false, "all": false, "A,B": false, "x;y": false, "?": false, "my.sel": true, "NO_SUCH": true} {
		if IsSelectionFile(sel) != file {
			t.Errorf("IsSelectionFile(%q) = %v", sel, !file)
		}
	}
}
