package bench

import (
	"fmt"
	"image/color"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// barData is the chart's data: median bars with min-max error bars.
type barData struct {
	med, lo, hi []float64
}

// Len, XY and YError implement plotter.XYer and plotter.YErrorer for the
// error bars (x is the bar's index).
func (d barData) Len() int                    { return len(d.med) }
func (d barData) XY(i int) (float64, float64) { return float64(i), d.med[i] }
func (d barData) YError(i int) (float64, float64) {
	return d.med[i] - d.lo[i], d.hi[i] - d.med[i]
}

// Plot builds the bar chart of the Mbit/s configurations (TCP_STREAM and
// TCP_MAERTS medians with min-max bars, values written above them) with the
// targets printed in the title. It returns nil when nothing was measured in
// Mbit/s.
func Plot(res *Results) (*plot.Plot, error) {
	var d barData
	var names []string
	var labels []string
	for _, s := range res.Summaries {
		if s.Units != "Mbit/s" || s.Runs == 0 {
			continue
		}
		d.med = append(d.med, s.Median)
		d.lo = append(d.lo, s.Min)
		d.hi = append(d.hi, s.Max)
		names = append(names, s.ID)
		labels = append(labels, fmt.Sprintf("%.0f", s.Median))
	}
	if len(d.med) == 0 {
		return nil, nil
	}
	p := plot.New()
	title := fmt.Sprintf("Seed topology: TCP throughput per configuration (median, min-max bars; %d round(s) x %d s)", res.Rounds, res.Seconds)
	for _, t := range res.Targets {
		title += "\n" + t.String()
	}
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(9)
	p.Y.Label.Text = "Mbit/s"
	p.X.Label.Text = "configuration (bench/README.md)"
	p.Y.Min = 0
	bars, err := plotter.NewBarChart(plotter.Values(d.med), vg.Points(18))
	if err != nil {
		return nil, err
	}
	bars.Color = color.RGBA{R: 0x33, G: 0x66, B: 0x99, A: 0xff}
	bars.LineStyle.Width = 0
	errs, err := plotter.NewYErrorBars(d)
	if err != nil {
		return nil, err
	}
	xys := make(plotter.XYs, len(d.med))
	for i := range d.med {
		xys[i] = plotter.XY{X: float64(i), Y: d.hi[i]}
	}
	vals, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
	if err != nil {
		return nil, err
	}
	for i := range vals.TextStyle {
		vals.TextStyle[i].Font.Size = vg.Points(7)
		vals.TextStyle[i].XAlign = -0.5 // centred on the bar
		vals.Offset = vg.Point{Y: vg.Points(2)}
	}
	p.Add(bars, errs, vals)
	p.NominalX(names...)
	// Half a slot of room on each side, so the outer bars are whole.
	p.X.Min, p.X.Max = -0.6, float64(len(names))-0.4
	return p, nil
}

// WritePlots writes results.png and results.svg into dir (nothing when no
// configuration was measured in Mbit/s).
func WritePlots(dir string, res *Results) error {
	p, err := Plot(res)
	if err != nil || p == nil {
		return err
	}
	w, h := vg.Points(720), vg.Points(440)
	if err := p.Save(w, h, filepath.Join(dir, FilePNG)); err != nil {
		return err
	}
	return p.Save(w, h, filepath.Join(dir, FileSVG))
}
