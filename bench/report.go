package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Output file names inside Options.OutDir.
const (
	FileMarkdown = "results.md"
	FileJSON     = "results.json"
	FilePNG      = "results.png"
	FileSVG      = "results.svg"
)

// fmtValue formats a throughput for the table.
func fmtValue(v float64, units string) string {
	if units == "Mbit/s" {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

// cell escapes a Markdown table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// WriteMarkdown writes the results as Markdown: a header line, the
// configuration table, the LSR table (configuration 10) and the targets.
func WriteMarkdown(w io.Writer, res *Results) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Seed topology bench: %d round(s) x %d s per run, configurations interleaved; %d CPUs, Linux %s; %s, took %.0f s.\n\n",
		res.Rounds, res.Seconds, res.Host.CPUs, res.Host.Kernel, res.Started.Format("2006-01-02 15:04 UTC"), res.DurationSec)
	b.WriteString("| # | configuration | test | median | min-max | unit | runs | CPU s per run, user/sys (median) | machine CPU s per GB | peak RSS of each mplsnode |\n")
	b.WriteString("|---|---|---|---:|---|---|---:|---|---:|---:|\n")
	for _, s := range res.Summaries {
		med, rng := "-", "-"
		if s.Runs > 0 {
			med = fmtValue(s.Median, s.Units)
			rng = fmtValue(s.Min, s.Units) + "-" + fmtValue(s.Max, s.Units)
		}
		runs := fmt.Sprint(s.Runs)
		if s.Failed > 0 {
			runs += fmt.Sprintf(" (%d failed)", s.Failed)
		}
		var cpu []string
		for _, p := range s.Procs {
			cpu = append(cpu, fmt.Sprintf("%s %.2f/%.2f", p.Role, p.UserSeconds, p.SysSeconds))
		}
		if s.Runs > 0 {
			cpu = append(cpu, fmt.Sprintf("machine %.2f", s.MachineCPUSeconds))
		}
		// Each mplsnode's peak, named by its namespace: "ns0 29.3 / ns1 21.4 MiB".
		var peaks []string
		for _, p := range s.Procs {
			if p.Mplsnode && p.PeakRSSKiB > 0 {
				ns, _, _ := strings.Cut(p.Role, " ")
				peaks = append(peaks, fmt.Sprintf("%s %.1f", ns, float64(p.PeakRSSKiB)/1024))
			}
		}
		rss := "-"
		if len(peaks) > 0 {
			rss = strings.Join(peaks, " / ") + " MiB"
		}
		perGB := "-"
		if s.CPUSecondsPerGB > 0 {
			perGB = fmt.Sprintf("%.2f", s.CPUSecondsPerGB)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", s.ID, cell(s.Name), s.Test, med, rng,
			s.Units, runs, cell(strings.Join(cpu, ", ")), perGB, rss)
	}
	if len(res.LSR) > 0 || res.LSRError != "" {
		gen := "?"
		if len(res.LSR) > 0 && res.LSR[0].Generator != "" {
			gen = res.LSR[0].Generator
		}
		fmt.Fprintf(&b, "\nConfiguration 10, LSR forwarding rate (bench/lsrrate: %s generator in ns0, forwarder in ns1, XDP counter in ns2):\n\n", gen)
		b.WriteString("| # | forwarder in ns1 | frame bytes | offered frames/s | frames/s | CPU s per Mpkt | frames counted | ingress drops |\n")
		b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|\n")
		for _, l := range res.LSR {
			fmt.Fprintf(&b, "| 10 | %s | %d | %.0f | %.0f | %.3f | %d | %d |\n", l.Config, l.FrameSize, l.OfferedPPS, l.PPS, l.CPUSecondsPerMpkt, l.Frames, l.IngressDrops)
		}
		if res.LSRError != "" {
			fmt.Fprintf(&b, "\nConfiguration 10 failed: %s\n", res.LSRError)
		}
	}
	b.WriteString("\nTargets (ratios of medians from this run):\n\n")
	for _, t := range res.Targets {
		mark := " "
		if t.Met {
			mark = "x"
		}
		fmt.Fprintf(&b, "- [%s] %s\n", mark, t)
	}
	b.WriteString("\nCPU: user/sys seconds of each process per run (rusage); machine: the whole machine's busy CPU seconds during the client's run, kernel softirq work included; per GB: those seconds over the GB (10^9 bytes) the run carried (Mbit/s rows). Ingress drops (10): frames the LSR lost at its ingress, mplsnode's lower_rx_overflow or the kernel's rx_dropped; mplsnode-swap@kernel-pps is mplsnode-swap offered the rate kernel-ipfwd reached in the same run. Peak RSS: VmHWM (ru_maxrss for the client) of each mplsnode process, ns0 client and ns1 LSR, the largest over the runs.\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON writes the results, every raw run included, as indented JSON.
func WriteJSON(w io.Writer, res *Results) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// WriteOutputs writes results.md, results.json, results.png and results.svg
// into dir.
func WriteOutputs(dir string, res *Results) error {
	write := func(name string, f func(io.Writer, *Results) error) error {
		out, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if err := f(out, res); err != nil {
			out.Close()
			return fmt.Errorf("%s: %w", name, err)
		}
		return out.Close()
	}
	if err := write(FileMarkdown, WriteMarkdown); err != nil {
		return err
	}
	if err := write(FileJSON, WriteJSON); err != nil {
		return err
	}
	return WritePlots(dir, res)
}
