package main

import (
	"fmt"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// chart draws the run as a PNG: the contenders side by side, then the curves. With nothing
// measured it writes nothing and reports false.
func chart(r *Report, path string) (bool, error) {
	var plots []*plot.Plot
	names := []string{"copy", "kafka_consume", "eos", "at_least_once", "per_message", "eos_envelope", "peer", "eos_cdc", "eos_cdc_tx", "peer_cdc"}
	var vals plotter.Values
	var labels []string
	for _, n := range names {
		if v, ok := r.RecordsPerSecond[n]; ok {
			vals = append(vals, v)
			labels = append(labels, n)
		}
	}
	if len(vals) > 0 { // none when every contender failed
		p, err := barPlot("records/s, same machine, one run", labels, vals)
		if err != nil {
			return false, err
		}
		plots = append(plots, p)
	}
	for _, c := range []struct{ key, title string }{
		{"batch_size", "eosink: records/s by batch size"},
		{"partitions", "eosink: records/s by partitions"},
		{"row_width", "eosink: records/s by row width"},
		{"insert_vs_upsert", "eosink: insert vs upsert"},
		{"synchronous_commit", "eosink: synchronous_commit"},
	} {
		pts := r.Curves[c.key]
		if len(pts) == 0 {
			continue
		}
		var v plotter.Values
		var l []string
		for _, pt := range pts {
			v = append(v, pt.RecordsPerSecond)
			l = append(l, pt.Label)
		}
		p, err := barPlot(c.title, l, v)
		if err != nil {
			return false, err
		}
		plots = append(plots, p)
	}
	if len(plots) == 0 {
		return false, nil
	}
	cols := 2
	rows := (len(plots) + cols - 1) / cols
	img := vgimg.New(vg.Points(float64(460*cols)), vg.Points(float64(300*rows)))
	dc := draw.New(img)
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, cols)
		for j := range cols {
			if k := i*cols + j; k < len(plots) {
				grid[i][j] = plots[k]
			}
		}
	}
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Points(12), PadY: vg.Points(12),
		PadTop: vg.Points(8), PadBottom: vg.Points(8), PadLeft: vg.Points(8), PadRight: vg.Points(8)}
	canvases := plot.Align(grid, tiles, dc)
	for i := range grid {
		for j := range grid[i] {
			if grid[i][j] != nil {
				grid[i][j].Draw(canvases[i][j])
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	_, err = vgimg.PngCanvas{Canvas: img}.WriteTo(f)
	return err == nil, err
}

func barPlot(title string, labels []string, vals plotter.Values) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = "records/s"
	bars, err := plotter.NewBarChart(vals, vg.Points(28))
	if err != nil {
		return nil, err
	}
	p.Add(bars)
	p.NominalX(labels...)
	xys := make(plotter.XYs, len(vals))
	text := make([]string, len(vals))
	for i, v := range vals {
		xys[i] = plotter.XY{X: float64(i), Y: v}
		text[i] = fmt.Sprintf("%.0f", v)
	}
	lbl, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: text})
	if err != nil {
		return nil, err
	}
	for i := range lbl.TextStyle {
		lbl.TextStyle[i].XAlign = draw.XCenter
		lbl.TextStyle[i].YAlign = draw.YBottom
	}
	p.Add(lbl)
	max := 0.0
	for _, v := range vals {
		max = max2(max, v)
	}
	p.Y.Min, p.Y.Max = 0, max*1.15
	return p, nil
}

func max2(a, b float64) float64 {
	if a > b {
		return a
	}
	return b
}
