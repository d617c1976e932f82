package netperf_test

import (
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/mplsnode/mplsnode/netperf"
)

// TestOmniStockOnlyOutputs checks every output name stock netperf 2.7.1
// accepts but fills from no measurement against nettest_omni.c's
// print_omni_init_list (header lines, joined by spaces in -o's header)
// and the values its globals start with: "Deprecated" for the system,
// interface, driver and security strings (deprecated_str), "0x%.4x" of -2
// for interface ids, 0 for never-assigned ints and CPU frequencies, -1 and
// "0x%.2x" of -1 for socket priority and TOS (netsh.c), "0" ports
// (scan_omni_args), AF_UNSPEC families unless -4/-6 say otherwise, an empty
// fill file. Planted bugs, each caught: REMOTE_SECURITY_ENABLED_NUM with
// the "Enabled Num" header the local one has (stock's remote header lacks
// "Num"); interface ids printed as "-2"; DEST_FAMILY 6 instead of Linux's
// AF_INET6 10.
func TestOmniStockOnlyOutputs(t *testing.T) {
	tests := []struct{ name, header, value string }{
		{"OUTPUT_NONE", " ", " "},
		{"SOURCE_PORT", "Source Port", "0"},
		{"SOURCE_ADDR", "Source Address", "0.0.0.0"},
		{"SOURCE_FAMILY", "Source Family", "0"},
		{"DEST_PORT", "Destination Port", "0"},
		{"DEST_FAMILY", "Destination Family", "0"},
		{"LOCAL_DRIVER_NAME", "Local Driver Name", "Deprecated"},
		{"LOCAL_DRIVER_VERSION", "Local Driver Version", "Deprecated"},
		{"LOCAL_DRIVER_FIRMWARE", "Local Driver Firmware", "Deprecated"},
		{"LOCAL_DRIVER_BUS", "Local Driver Bus", "Deprecated"},
		{"REMOTE_DRIVER_NAME", "Remote Driver Name", "Deprecated"},
		{"REMOTE_DRIVER_BUS", "Remote Driver Bus", "Deprecated"},
		{"LOCAL_INTERFACE_NAME", "Local Interface Name", "Deprecated"},
		{"REMOTE_INTERFACE_NAME", "Remote Interface Name", "Deprecated"},
		{"LOCAL_INTERFACE_SLOT", "Local Interface Slot", "Deprecated"},
		{"REMOTE_INTERFACE_SLOT", "Remote Interface Slot", "Deprecated"},
		{"LOCAL_INTERFACE_VENDOR", "Local Interface Vendor", "0xfffffffe"},
		{"LOCAL_INTERFACE_DEVICE", "Local Interface Device", "0xfffffffe"},
		{"LOCAL_INTERFACE_SUBVENDOR", "Local Interface Subvendor", "0xfffffffe"},
		{"REMOTE_INTERFACE_SUBDEVICE", "Remote Interface Subdevice", "0xfffffffe"},
		{"REMOTE_SYSNAME", "Remote Sysname", "Deprecated"},
		{"REMOTE_RELEASE", "Remote Release", "Deprecated"},
		{"REMOTE_VERSION", "Remote Version", "Deprecated"},
		{"REMOTE_MACHINE", "Remote Machine", "Deprecated"},
		{"REMOTE_SYSTEM_MODEL", "Remote System Model", "Deprecated"},
		{"REMOTE_CPU_MODEL", "Remote CPU Model", "Deprecated"},
		{"REMOTE_CPU_FREQUENCY", "Remote CPU Frequency MHz", "0"},
		{"LOCAL_SECURITY_ENABLED", "Local OS Security Enabled", "Deprecated"},
		{"LOCAL_SECURITY_TYPE", "Local OS Security Type", "Deprecated"},
		{"LOCAL_SECURITY_SPECIFIC", "Local OS Security Specific", "Deprecated"},
		{"LOCAL_SECURITY_ENABLED_NUM", "Local OS Security Enabled Num", "0"},
		{"LOCAL_SECURITY_TYPE_ID", "Local OS Security Type ID", "0"},
		{"REMOTE_SECURITY_ENABLED", "Remote OS Security Enabled", "Deprecated"},
		{"REMOTE_SECURITY_ENABLED_NUM", "Remote OS Security Enabled", "0"},
		{"REMOTE_SECURITY_TYPE_ID", "Remote OS Security Type", "0"},
		{"LOCAL_SOCKET_PRIO", "Local Socket Priority", "-1"},
		{"REMOTE_SOCKET_PRIO", "Remote Socket Priority", "-1"},
		{"LOCAL_SOCKET_TOS", "Local Socket TOS", "0xffffffff"},
		{"REMOTE_SOCKET_TOS", "Remote Socket TOS", "0xffffffff"},
		{"LOCAL_FILL_FILE", "Local Fill File", ""},
		{"REMOTE_FILL_FILE", "Remote Fill File", ""},
	}
	cfg := netperf.NewConfig("127.0.0.1", netperf.TCPStream)
	rep := &netperf.Report{Config: cfg, Family: netperf.FamilyIPv4, ConfidenceMet: true}
	for _, tc := range tests {
		if !netperf.KnownOmniOutput(tc.name) {
			t.Errorf("%s rejected as unknown", tc.name)
			continue
		}
		got := csvLines(t, rep, tc.name)
		if got[0] != tc.header || got[1] != tc.value {
			t.Errorf("%s: header %q value %q, want %q %q", tc.name, got[0], got[1], tc.header, tc.value)
		}
	}

	// Addressing as the test-specific options set it: -P ports, -L/-H
	// names, -6 (AF_INET6 is 10 on Linux); with -H but no -L the source is
	// the data family's wildcard.
	cfg.LocalDataPort, cfg.RemoteDataPort = 5001, 5002
	cfg.DataHost, cfg.LocalDataFamily, cfg.RemoteDataFamily = "::1", netperf.FamilyIPv6, netperf.FamilyIPv6
	rep = &netperf.Report{Config: cfg, Family: netperf.FamilyIPv6, ConfidenceMet: true}
	got := csvLines(t, rep, "SOURCE_PORT,DEST_PORT,SOURCE_ADDR,DEST_ADDR,SOURCE_FAMILY,DEST_FAMILY")
	if want := "5001,5002,::0,::1,10,10"; got[1] != want {
		t.Errorf("addressing %q, want %q", got[1], want)
	}
	cfg.LocalDataAddr, cfg.LocalDataFamily = "127.0.0.1", netperf.FamilyIPv4
	rep.Config = cfg
	if got := csvLines(t, rep, "SOURCE_ADDR,SOURCE_FAMILY"); got[1] != "127.0.0.1,2" {
		t.Errorf("with -L 127.0.0.1,4: %q, want 127.0.0.1,2", got[1])
	}
}

// TestOmniLocalSystemOutputs checks LOCAL_CPU_MODEL and
// LOCAL_CPU_FREQUENCY against lscpu(1) (util-linux reads the same
// /proc/cpuinfo fields independently of us): the model name as is, the
// clock in whole MHz. Planted bug: the frequency rounded instead of
// truncated as "%d" of an int: 2597 against lscpu's 2596.122 (caught on a
// host whose fraction is >= .5; the model check catches a wrong field on
// any host).
func TestOmniLocalSystemOutputs(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/cpuinfo is Linux's")
	}
	out, err := exec.Command("lscpu").Output()
	if err != nil {
		t.Skipf("lscpu: %v", err)
	}
	var model, mhz string
	for _, l := range strings.Split(string(out), "\n") {
		k, v, _ := strings.Cut(l, ":")
		switch strings.TrimSpace(k) {
		case "Model name":
			model = strings.TrimSpace(v)
		case "CPU MHz":
			mhz, _, _ = strings.Cut(strings.TrimSpace(v), ".")
		}
	}
	rep := &netperf.Report{Config: netperf.NewConfig("127.0.0.1", netperf.TCPRR), Family: netperf.FamilyIPv4}
	var got strings.Builder
	if err := rep.WriteOmni(&got, netperf.OmniKeyval, "LOCAL_CPU_MODEL,LOCAL_CPU_FREQUENCY,LOCAL_SYSTEM_MODEL", false); err != nil {
		t.Fatal(err)
	}
	kv := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(got.String()), "\n") {
		k, v, _ := strings.Cut(l, "=")
		kv[k] = v
	}
	if model != "" && kv["LOCAL_CPU_MODEL"] != model {
		t.Errorf("LOCAL_CPU_MODEL = %q, lscpu says %q", kv["LOCAL_CPU_MODEL"], model)
	}
	if mhz != "" && kv["LOCAL_CPU_FREQUENCY"] != mhz {
		t.Errorf("LOCAL_CPU_FREQUENCY = %q, lscpu says %s MHz", kv["LOCAL_CPU_FREQUENCY"], mhz)
	}
	if kv["LOCAL_SYSTEM_MODEL"] == "" {
		t.Errorf("LOCAL_SYSTEM_MODEL empty, want the DMI product name or stock's Deprecated")
	}
}

// TestOmniNoValue checks what stock prints for an output without a value
// (RESULT_BRAND without -B: display_value NULL) and for selection blocks,
// from print_omni_csv, print_omni_keyword and print_omni_human: -o writes
// "," and skips one blank-filled byte (so the next field starts with a
// space, and a last empty field leaves ",," after the cut), puts every
// block on one line, and prints nothing when the first block is empty;
// -k leaves the name out; -O leaves a blank column as wide as its header.
// OUTPUT_END ends its block. Planted bugs, each caught: the empty field
// written as "" (the old ",," in the middle, no space); one CSV line per
// block; OUTPUT_END ignored.
func TestOmniNoValue(t *testing.T) {
	cfg := netperf.NewConfig("127.0.0.1", netperf.TCPStream)
	rep := &netperf.Report{Config: cfg, Family: netperf.FamilyIPv4, Result: netperf.Result{Throughput: 9.5}}
	cases := []struct {
		mode netperf.OmniMode
		sel  string
		want string
	}{
		{netperf.OmniCSV, "PROTOCOL,RESULT_BRAND,THROUGHPUT", "Protocol,Result Tag,Throughput\nTCP,, 9.50\n"},
		{netperf.OmniCSV, "PROTOCOL,RESULT_BRAND", "Protocol,Result Tag\nTCP,,\n"},
		{netperf.OmniCSV, "RESULT_BRAND,PROTOCOL", "Result Tag,Protocol\n, TCP\n"},
		{netperf.OmniCSV, "PROTOCOL;THROUGHPUT", "Protocol,Throughput\nTCP,9.50\n"},
		{netperf.OmniCSV, "PROTOCOL,OUTPUT_END,THROUGHPUT;OUTPUT_NONE", "Protocol, \nTCP, \n"},
		{netperf.OmniCSV, ";THROUGHPUT", ""},
		{netperf.OmniKeyval, "PROTOCOL,RESULT_BRAND,THROUGHPUT", "PROTOCOL=TCP\nTHROUGHPUT=9.50\n"},
		{netperf.OmniHuman, "RESULT_BRAND,PROTOCOL", "Result Protocol \nTag             \n                \n                \n       TCP      \n"},
		{netperf.OmniHuman, ";PROTOCOL", "\nProtocol \n         \n         \n         \nTCP      \n"},
	}
	for _, tc := range cases {
		var got strings.Builder
		if err := rep.WriteOmni(&got, tc.mode, tc.sel, true); err != nil {
			t.Fatal(err)
		}
		body := strings.TrimPrefix(got.String(), rep.Banner())
		if body != tc.want {
			t.Errorf("mode %d %q:\n%q\nwant\n%q", tc.mode, tc.sel, body, tc.want)
		}
	}
}

func csvLines(t *testing.T, rep *netperf.Report, sel string) [2]string {
	t.Helper()
	var got strings.Builder
	if err := rep.WriteOmni(&got, netperf.OmniCSV, sel, true); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimPrefix(got.String(), rep.Banner()), "\n")
	if len(lines) < 2 {
		t.Fatalf("%s: %q", sel, got.String())
	}
	return [2]string{lines[0], lines[1]}
}

// TestOmniLocalInterfaceOutputs checks the LOCAL_INTERFACE_* and
// LOCAL_DRIVER_* outputs against iproute2 and ethtool(8), oracles that
// read the same kernel state by their own means: a live TCP_RR over
// loopback names the interface "ip -o addr show to 127.0.0.1" names, and
// its driver fields are stock's "Deprecated" where "ethtool -i" finds no
// driver information; for every interface of this namespace with some
// (no traffic sent), the driver, version, firmware and bus are ethtool's,
// the slot its bus and the PCI ids "0x%.4x". Planted bugs, each caught:
// interfaceOf never matching (the name "Deprecated"); the driver field
// answering the bus; the version field reading the firmware.
func TestOmniLocalInterfaceOutputs(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("ethtool and interface lookups are Linux's")
	}
	if _, err := exec.LookPath("ethtool"); err != nil {
		t.Skip("ethtool not installed")
	}
	addr, _ := startServer(t, &netperf.Server{})
	rep, err := netperf.Run(runCtx(t), loopbackConfig(t, addr, netperf.TCPRR, -10))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	out, err := exec.Command("ip", "-o", "addr", "show", "to", "127.0.0.1").Output()
	if err != nil {
		t.Skipf("ip addr: %v", err)
	}
	fields := strings.Fields(string(out))
	if len(fields) < 2 {
		t.Fatalf("ip -o addr show to 127.0.0.1: %q", out)
	}
	kv := keyvals(t, rep, "LOCAL_INTERFACE_NAME,LOCAL_DRIVER_NAME,LOCAL_INTERFACE_VENDOR")
	if kv["LOCAL_INTERFACE_NAME"] != fields[1] {
		t.Errorf("LOCAL_INTERFACE_NAME = %q, ip says %q", kv["LOCAL_INTERFACE_NAME"], fields[1])
	}
	if _, err := exec.Command("ethtool", "-i", fields[1]).Output(); err != nil && kv["LOCAL_DRIVER_NAME"] != "Deprecated" {
		t.Errorf("LOCAL_DRIVER_NAME = %q for %s without driver information, want stock's Deprecated", kv["LOCAL_DRIVER_NAME"], fields[1])
	}

	ifs, _ := exec.Command("ls", "/sys/class/net").Output()
	checked := 0
	for _, ifname := range strings.Fields(string(ifs)) {
		out, err := exec.Command("ethtool", "-i", ifname).Output()
		if err != nil {
			continue
		}
		want := map[string]string{}
		for _, l := range strings.Split(string(out), "\n") {
			k, v, _ := strings.Cut(l, ":")
			want[k] = strings.TrimSpace(v)
		}
		r := &netperf.Report{Config: netperf.NewConfig("127.0.0.1", netperf.TCPRR), Result: netperf.Result{LocalInterface: ifname}}
		kv := keyvals(t, r, "LOCAL_DRIVER_NAME,LOCAL_DRIVER_VERSION,LOCAL_DRIVER_FIRMWARE,LOCAL_DRIVER_BUS,LOCAL_INTERFACE_SLOT,LOCAL_INTERFACE_VENDOR,LOCAL_INTERFACE_SUBDEVICE")
		for name, key := range map[string]string{"LOCAL_DRIVER_NAME": "driver", "LOCAL_DRIVER_VERSION": "version",
			"LOCAL_DRIVER_FIRMWARE": "firmware-version", "LOCAL_DRIVER_BUS": "bus-info", "LOCAL_INTERFACE_SLOT": "bus-info"} {
			if kv[name] != want[key] {
				t.Errorf("%s: %s = %q, ethtool -i says %s %q", ifname, name, kv[name], key, want[key])
			}
		}
		for _, name := range []string{"LOCAL_INTERFACE_VENDOR", "LOCAL_INTERFACE_SUBDEVICE"} {
			if v := kv[name]; !strings.HasPrefix(v, "0x") || len(v) < 6 {
				t.Errorf("%s: %s = %q, want 0x%%.4x", ifname, name, v)
			}
		}
		checked++
	}
	t.Logf("%d interfaces with driver information checked", checked)
}

func keyvals(t *testing.T, rep *netperf.Report, sel string) map[string]string {
	t.Helper()
	var got strings.Builder
	if err := rep.WriteOmni(&got, netperf.OmniKeyval, sel, false); err != nil {
		t.Fatal(err)
	}
	kv := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(got.String()), "\n") {
		k, v, _ := strings.Cut(l, "=")
		kv[k] = v
	}
	return kv
}

// TestGlobalLocalName checks the global -L as complete_addrinfos uses it:
// the data connection's local name (banner "from", SOURCE_ADDR) without a
// test-specific -L or -H; with a test-specific -H the data family's
// wildcard instead. Planted bug (the global -L ignored, the old banner)
// caught.
func TestGlobalLocalName(t *testing.T) {
	cfg := netperf.NewConfig("127.0.0.1", netperf.TCPStream)
	cfg.LocalHost = "127.0.0.9"
	rep := &netperf.Report{Config: cfg, Family: netperf.FamilyIPv4}
	if b := rep.Banner(); !strings.Contains(b, " from 127.0.0.9 (127.0.0.9) port 0 AF_INET to ") {
		t.Errorf("banner %q", b)
	}
	if got := csvLines(t, rep, "SOURCE_ADDR"); got[1] != "127.0.0.9" {
		t.Errorf("SOURCE_ADDR %q", got[1])
	}
	rep.Config.DataHost = "127.0.0.1"
	if b := rep.Banner(); !strings.Contains(b, " from 0.0.0.0 (0.0.0.0) port 0 AF_INET to 127.0.0.1 ") {
		t.Errorf("with -- -H: banner %q", b)
	}
}
