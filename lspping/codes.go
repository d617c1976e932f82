package lspping

import "fmt"

// ReturnCode is an echo reply's return code (RFC 8029 §3.1). Where the
// RFC's words name "stack-depth <RSC>", the return subcode is that depth.
type ReturnCode uint8

// Return codes.
const (
	CodeNone                   ReturnCode = 0
	CodeMalformed              ReturnCode = 1
	CodeTLVNotUnderstood       ReturnCode = 2
	CodeEgress                 ReturnCode = 3
	CodeNoMapping              ReturnCode = 4
	CodeDownstreamMismatch     ReturnCode = 5
	CodeUpstreamIfUnknown      ReturnCode = 6
	CodeLabelSwitched          ReturnCode = 8
	CodeSwitchedNoMPLS         ReturnCode = 9
	CodeWrongLabel             ReturnCode = 10
	CodeNoLabelEntry           ReturnCode = 11
	CodeProtocolNotOnIf        ReturnCode = 12
	CodePrematureTermination   ReturnCode = 13
	CodeSeeDDMAP               ReturnCode = 14
	CodeLabelSwitchedFECChange ReturnCode = 15
)

// codeWords holds each return code in the RFC's words (Describe; %d
// stands for the subcode).
var codeWords = [...]string{
	CodeNone:                   "No return code",
	CodeMalformed:              "Malformed echo request received",
	CodeTLVNotUnderstood:       "One or more of the TLVs was not understood",
	CodeEgress:                 "Replying router is an egress for the FEC at stack-depth %d",
	CodeNoMapping:              "Replying router has no mapping for the FEC at stack-depth %d",
	CodeDownstreamMismatch:     "Downstream Mapping Mismatch",
	CodeUpstreamIfUnknown:      "Upstream Interface Index Unknown",
	7:                          "Reserved",
	CodeLabelSwitched:          "Label switched at stack-depth %d",
	CodeSwitchedNoMPLS:         "Label switched but no MPLS forwarding at stack-depth %d",
	CodeWrongLabel:             "Mapping for this FEC is not the given label at stack-depth %d",
	CodeNoLabelEntry:           "No label entry at stack-depth %d",
	CodeProtocolNotOnIf:        "Protocol not associated with interface at FEC stack-depth %d",
	CodePrematureTermination:   "Premature termination of ping due to label stack shrinking to a single label",
	CodeSeeDDMAP:               "See DDMAP TLV for meaning of Return Code and Return Subcode",
	CodeLabelSwitchedFECChange: "Label switched with FEC change",
}

// codeNames holds each return code's short name (String).
var codeNames = []string{
	CodeNone:                   "none",
	CodeMalformed:              "malformed-request",
	CodeTLVNotUnderstood:       "tlv-not-understood",
	CodeEgress:                 "egress",
	CodeNoMapping:              "no-fec-mapping",
	CodeDownstreamMismatch:     "downstream-mismatch",
	CodeUpstreamIfUnknown:      "upstream-if-unknown",
	CodeLabelSwitched:          "label-switched",
	CodeSwitchedNoMPLS:         "label-switched-no-mpls",
	CodeWrongLabel:             "wrong-label",
	CodeNoLabelEntry:           "no-label-entry",
	CodeProtocolNotOnIf:        "protocol-not-on-interface",
	CodePrematureTermination:   "premature-termination",
	CodeSeeDDMAP:               "see-ddmap",
	CodeLabelSwitchedFECChange: "label-switched-fec-change",
}

// String returns the code's short name, e.g. "egress" or "label-switched".
func (c ReturnCode) String() string {
	return nameOf(codeNames, c, "code-%d")
}

// Describe returns the code in the RFC's words with the subcode in place
// of <RSC>, e.g. "Replying router is an egress for the FEC at stack-depth
// 1".
func (c ReturnCode) Describe(subcode uint8) string {
	if int(c) >= len(codeWords) {
		return fmt.Sprintf("Return code %d subcode %d", uint8(c), subcode)
	}
	w := codeWords[c]
	for i := 0; i+1 < len(w); i++ {
		if w[i] == '%' {
			return fmt.Sprintf(w, subcode)
		}
	}
	return w
}

// Codes returns the return codes that have a name, in order, for the
// counters.
func Codes() []ReturnCode {
	return []ReturnCode{CodeMalformed, CodeTLVNotUnderstood, CodeEgress, CodeNoMapping,
		CodeDownstreamMismatch, CodeUpstreamIfUnknown, CodeLabelSwitched, CodeSwitchedNoMPLS,
		CodeWrongLabel, CodeNoLabelEntry, CodeProtocolNotOnIf, CodePrematureTermination,
		CodeSeeDDMAP, CodeLabelSwitchedFECChange}
}
