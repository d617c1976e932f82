package netperf

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
)

// omniOutputOrder is nettest_omni.c's enum netperf_output_name from
// OUTPUT_NONE to OUTPUT_END: the order of "-o ?" and of "all".
var omniOutputOrder = strings.Fields(`OUTPUT_NONE SOCKET_TYPE PROTOCOL DIRECTION ELAPSED_TIME THROUGHPUT
THROUGHPUT_UNITS LSS_SIZE_REQ LSS_SIZE LSS_SIZE_END LSR_SIZE_REQ LSR_SIZE LSR_SIZE_END RSS_SIZE_REQ RSS_SIZE
RSS_SIZE_END RSR_SIZE_REQ RSR_SIZE RSR_SIZE_END LOCAL_SEND_SIZE LOCAL_RECV_SIZE REMOTE_SEND_SIZE REMOTE_RECV_SIZE
REQUEST_SIZE RESPONSE_SIZE LOCAL_CPU_UTIL LOCAL_CPU_PERCENT_USER LOCAL_CPU_PERCENT_SYSTEM LOCAL_CPU_PERCENT_IOWAIT
LOCAL_CPU_PERCENT_IRQ LOCAL_CPU_PERCENT_SWINTR LOCAL_CPU_METHOD LOCAL_SD REMOTE_CPU_UTIL REMOTE_CPU_PERCENT_USER
REMOTE_CPU_PERCENT_SYSTEM REMOTE_CPU_PERCENT_IOWAIT REMOTE_CPU_PERCENT_IRQ REMOTE_CPU_PERCENT_SWINTR REMOTE_CPU_METHOD
REMOTE_SD SD_UNITS CONFIDENCE_LEVEL CONFIDENCE_INTERVAL CONFIDENCE_ITERATION THROUGHPUT_CONFID LOCAL_CPU_CONFID
REMOTE_CPU_CONFID TRANSACTION_RATE RT_LATENCY BURST_SIZE LOCAL_TRANSPORT_RETRANS REMOTE_TRANSPORT_RETRANS
TRANSPORT_MSS LOCAL_SEND_THROUGHPUT LOCAL_RECV_THROUGHPUT REMOTE_SEND_THROUGHPUT REMOTE_RECV_THROUGHPUT
LOCAL_CPU_BIND LOCAL_CPU_COUNT LOCAL_CPU_PEAK_UTIL LOCAL_CPU_PEAK_ID LOCAL_CPU_MODEL LOCAL_CPU_FREQUENCY
REMOTE_CPU_BIND REMOTE_CPU_COUNT REMOTE_CPU_PEAK_UTIL REMOTE_CPU_PEAK_ID REMOTE_CPU_MODEL REMOTE_CPU_FREQUENCY
SOURCE_PORT SOURCE_ADDR SOURCE_FAMILY DEST_PORT DEST_ADDR DEST_FAMILY LOCAL_SEND_CALLS LOCAL_RECV_CALLS
LOCAL_BYTES_PER_RECV LOCAL_BYTES_PER_SEND LOCAL_BYTES_SENT LOCAL_BYTES_RECVD LOCAL_BYTES_XFERD LOCAL_SEND_OFFSET
LOCAL_RECV_OFFSET LOCAL_SEND_ALIGN LOCAL_RECV_ALIGN LOCAL_SEND_WIDTH LOCAL_RECV_WIDTH LOCAL_SEND_DIRTY_COUNT
LOCAL_RECV_DIRTY_COUNT LOCAL_RECV_CLEAN_COUNT LOCAL_NODELAY LOCAL_CORK REMOTE_SEND_CALLS REMOTE_RECV_CALLS
REMOTE_BYTES_PER_RECV REMOTE_BYTES_PER_SEND REMOTE_BYTES_SENT REMOTE_BYTES_RECVD REMOTE_BYTES_XFERD
REMOTE_SEND_OFFSET REMOTE_RECV_OFFSET REMOTE_SEND_ALIGN REMOTE_RECV_ALIGN REMOTE_SEND_WIDTH REMOTE_RECV_WIDTH
REMOTE_SEND_DIRTY_COUNT REMOTE_RECV_DIRTY_COUNT REMOTE_RECV_CLEAN_COUNT REMOTE_NODELAY REMOTE_CORK LOCAL_SYSNAME
LOCAL_SYSTEM_MODEL LOCAL_RELEASE LOCAL_VERSION LOCAL_MACHINE REMOTE_SYSNAME REMOTE_SYSTEM_MODEL REMOTE_RELEASE
REMOTE_VERSION REMOTE_MACHINE LOCAL_INTERFACE_NAME LOCAL_INTERFACE_VENDOR LOCAL_INTERFACE_DEVICE
LOCAL_INTERFACE_SUBVENDOR LOCAL_INTERFACE_SUBDEVICE LOCAL_DRIVER_NAME LOCAL_DRIVER_VERSION LOCAL_DRIVER_FIRMWARE
LOCAL_DRIVER_BUS LOCAL_INTERFACE_SLOT REMOTE_INTERFACE_NAME REMOTE_INTERFACE_VENDOR REMOTE_INTERFACE_DEVICE
REMOTE_INTERFACE_SUBVENDOR REMOTE_INTERFACE_SUBDEVICE REMOTE_DRIVER_NAME REMOTE_DRIVER_VERSION
REMOTE_DRIVER_FIRMWARE REMOTE_DRIVER_BUS REMOTE_INTERFACE_SLOT LOCAL_INTERVAL_USECS LOCAL_INTERVAL_BURST
REMOTE_INTERVAL_USECS REMOTE_INTERVAL_BURST LOCAL_SECURITY_TYPE_ID LOCAL_SECURITY_TYPE LOCAL_SECURITY_ENABLED_NUM
LOCAL_SECURITY_ENABLED LOCAL_SECURITY_SPECIFIC REMOTE_SECURITY_TYPE_ID REMOTE_SECURITY_TYPE
REMOTE_SECURITY_ENABLED_NUM REMOTE_SECURITY_ENABLED REMOTE_SECURITY_SPECIFIC RESULT_BRAND UUID MIN_LATENCY
MAX_LATENCY P50_LATENCY P90_LATENCY P99_LATENCY MEAN_LATENCY STDDEV_LATENCY LOCAL_SOCKET_PRIO REMOTE_SOCKET_PRIO
LOCAL_SOCKET_TOS REMOTE_SOCKET_TOS LOCAL_CONG_CONTROL REMOTE_CONG_CONTROL LOCAL_FILL_FILE REMOTE_FILL_FILE
COMMAND_LINE OUTPUT_END`)

// allOmniSelection is what "-o all" selects (set_output_list_all): four
// blocks, SOCKET_TYPE..RESPONSE_SIZE, LOCAL_CPU_UTIL..TRANSPORT_MSS,
// LOCAL_SEND_THROUGHPUT..REMOTE_CORK and LOCAL_SYSNAME..COMMAND_LINE.
func allOmniSelection() string {
	span := func(from, to string) string {
		var i, j int
		for k, n := range omniOutputOrder {
			switch n {
			case from:
				i = k
			case to:
				j = k
			}
		}
		return strings.Join(omniOutputOrder[i:j+1], ",")
	}
	return span("SOCKET_TYPE", "RESPONSE_SIZE") + ";" + span("LOCAL_CPU_UTIL", "TRANSPORT_MSS") + ";" +
		span("LOCAL_SEND_THROUGHPUT", "REMOTE_CORK") + ";" + span("LOCAL_SYSNAME", "COMMAND_LINE")
}

// WriteOmniChoices prints the output names as "-o ?" and "-k ?" (CSV,
// comma-separated) and "-O ?" (one a line) do (dump_netperf_output_choices).
func WriteOmniChoices(w io.Writer, mode OmniMode) error {
	sep := "\n"
	if mode != OmniHuman {
		sep = ","
	}
	_, err := io.WriteString(w, strings.Join(omniOutputOrder, sep)+"\n")
	return err
}

// headerText is an output's header lines joined by spaces, as -o prints
// it and as a selection file may name it.
func headerText(o omniOutput) string {
	var ls []string
	for _, l := range o.lines {
		if l == "" {
			break
		}
		ls = append(ls, l)
	}
	return strings.Join(ls, " ")
}

// matchOutput is match_string_to_output: the first output, in stock's
// order, whose name or header text is s (case ignored); OUTPUT_NONE when
// none is.
func matchOutput(s string) string {
	for _, n := range omniOutputOrder {
		if strings.EqualFold(s, n) || strings.EqualFold(s, headerText(omniOutputs[n])) {
			return n
		}
	}
	return "OUTPUT_NONE"
}

// IsSelectionFile reports whether stock netperf would read sel as the
// name of an output selection file rather than a list of names: it is not
// "all", holds no ',' or ';', and is not an output name.
func IsSelectionFile(sel string) bool {
	if sel == "" || sel == "?" || strings.EqualFold(sel, "all") || strings.ContainsAny(sel, ",;") {
		return false
	}
	_, known := omniOutputs[strings.ToUpper(sel)]
	return !known
}

// SelectionFromFile turns the content of an output selection file (the
// FILE of -o/-O/-k FILE) into a selection WriteOmni takes, read as
// parse_output_selection_file reads it: one block per line, at most four;
// entries separated by commas, kept verbatim (spaces included, other
// unprintable bytes dropped); each entry an output's name or header text
// (matchOutput), anything else (a blank line too) OUTPUT_NONE's
// one-space column.
func SelectionFromFile(content string) string {
	var blocks []string
	var block []string
	var name []byte
	lines := 0
	for i := 0; i < len(content) && lines < maxOmniBlocks; i++ {
		switch c := content[i]; {
		case c == ',':
			block = append(block, matchOutput(string(name)))
			name = name[:0]
		case c == '\n':
			block = append(block, matchOutput(string(name)))
			blocks = append(blocks, strings.Join(block, ","))
			block, name = nil, name[:0]
			lines++
		case c >= 0x20 && c < 0x7f:
			name = append(name, c)
		}
	}
	if lines < maxOmniBlocks && (len(name) > 0 || len(block) > 0) {
		if len(name) > 0 {
			block = append(block, matchOutput(string(name)))
		}
		blocks = append(blocks, strings.Join(block, ","))
	}
	if len(blocks) == 0 {
		return "OUTPUT_END" // an empty file: no outputs at all
	}
	return strings.Join(blocks, ";")
}

// SelectionFileError is stock netperf's complaint about an output
// selection file it cannot use (parse_output_selection_file): a file it
// cannot open, or an entry of 80 characters or more. Stock prints the
// message on stdout and exits 255.
type SelectionFileError struct{ Msg string }

func (e *SelectionFileError) Error() string { return e.Msg }

// maxSelectionEntry is the size of parse_output_selection_file's name
// buffer: an entry that reaches it with more input to come is refused.
const maxSelectionEntry = 80

// ReadSelectionFile reads the output selection file of -o/-O/-k FILE as
// stock does: a file it cannot open is "Could not open output selection
// file 'FILE' errno N" (a directory opens, and reads as an empty file);
// an entry of 80 printable characters followed by anything more is
// "Output selection starting column L on line C is too long", with stock's
// line number (from 1) and column (counted over the whole file) in the
// words' swapped places, as stock prints them. Otherwise it returns the
// selection of SelectionFromFile.
func ReadSelectionFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, syscall.EISDIR) {
		var errno syscall.Errno
		errors.As(err, &errno)
		return "", &SelectionFileError{fmt.Sprintf("Could not open output selection file '%s' errno %d", path, int(errno))}
	}
	line, column, namepos := 0, 1, 0
	for _, c := range b {
		if line >= maxOmniBlocks {
			break
		}
		if namepos == maxSelectionEntry {
			return "", &SelectionFileError{fmt.Sprintf("Output selection starting column %d on line %d is too long", line+1, column)}
		}
		switch {
		case c == ',':
			namepos = 0
		case c == '\n':
			namepos = 0
			line++
		case c >= 0x20 && c < 0x7f:
			namepos++
		}
		column++
	}
	return SelectionFromFile(string(b)), nil
}
