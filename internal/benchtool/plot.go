package benchtool

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"
)

// The round-five plot: p99 latency against concurrency, one panel per
// (mode, API), one line per target (the gateway's profiles and the
// panel's reference: the floor over REST, the plain go-sdk server over
// MCP), both axes logarithmic. cmd/benchplot draws it from sweep.json.

// plotPanel is one (mode, API) panel.
type plotPanel struct {
	mode Mode
	api  API
}

// plotSize is the layout of the plot, in SVG user units.
const (
	plotPanelW  = 420
	plotPanelH  = 280
	plotMarginL = 60
	plotMarginT = 40
	plotMarginB = 40
	plotLegendW = 190
	plotGap     = 30
)

// plotColors are the lines' colours, in the order the targets appear.
var plotColors = []string{"#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02"}

// plotted reports whether row is drawn: gateways, the floor and the plain
// go-sdk server (not the chi baseline, which makes no promise).
func plotted(row SweepRow) bool {
	return row.P99MS != nil && *row.P99MS > 0 && (row.Profile != "" || row.Target == FloorName || row.Target == PlainMCPName)
}

// WriteP99SVG draws the sweep's p99 against concurrency as an SVG.
func (s *Sweep) WriteP99SVG(w io.Writer) error {
	var panels []plotPanel
	for _, row := range s.Rows {
		p := plotPanel{row.Mode, row.API}
		if plotted(row) && !slices.Contains(panels, p) {
			panels = append(panels, p)
		}
	}
	if len(panels) == 0 {
		return fmt.Errorf("benchtool: plot: no row with a p99 of a gateway, the floor or plain-mcp")
	}
	slices.SortFunc(panels, func(a, b plotPanel) int {
		return strings.Compare(string(a.api)+string(a.mode), string(b.api)+string(b.mode))
	})
	cols := min(2, len(panels))
	rowsN := (len(panels) + cols - 1) / cols
	cellW, cellH := plotMarginL+plotPanelW+plotLegendW+plotGap, plotMarginT+plotPanelH+plotMarginB+plotGap
	width, height := cols*cellW, rowsN*cellH+30
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="14">p99 latency against concurrency (medians of %d round(s) x %s; %s; %s)</text>`+"\n",
		s.Rounds, html.EscapeString(s.Duration), html.EscapeString(s.Started.Format("2006-01-02 15:04 UTC")), html.EscapeString(s.LoadBefore))
	for i, p := range panels {
		s.drawPanel(&b, p, (i%cols)*cellW, 30+(i/cols)*cellH)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// drawPanel draws panel p with its top-left corner at (x0, y0).
func (s *Sweep) drawPanel(b *strings.Builder, p plotPanel, x0, y0 int) {
	lines := map[string][]SweepRow{}
	var names []string
	var cs []int
	var lo, hi = math.Inf(1), math.Inf(-1)
	for _, row := range s.Rows {
		if row.Mode != p.mode || row.API != p.api || !plotted(row) {
			continue
		}
		if _, ok := lines[row.Target]; !ok {
			names = append(names, row.Target)
		}
		lines[row.Target] = append(lines[row.Target], row)
		if !slices.Contains(cs, row.Concurrency) {
			cs = append(cs, row.Concurrency)
		}
		lo, hi = math.Min(lo, *row.P99MS), math.Max(hi, *row.P99MS)
	}
	slices.Sort(cs)
	// Decades around the data on y; the sweep's concurrencies on x.
	yLo, yHi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if yHi == yLo {
		yHi++
	}
	xLo, xHi := math.Log10(float64(cs[0])), math.Log10(float64(cs[len(cs)-1]))
	if xHi == xLo {
		xLo, xHi = xLo-0.5, xHi+0.5
	}
	left, top := x0+plotMarginL, y0+plotMarginT
	px := func(c int) float64 { return float64(left) + (math.Log10(float64(c))-xLo)/(xHi-xLo)*plotPanelW }
	py := func(v float64) float64 {
		return float64(top) + (yHi-math.Log10(v))/(yHi-yLo)*plotPanelH
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="13">%s, %s</text>`+"\n", left, top-12, html.EscapeString(string(p.api)), html.EscapeString(string(p.mode)))
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", left, top, plotPanelW, plotPanelH)
	for d := yLo; d <= yHi; d++ {
		y := py(math.Pow(10, d))
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", left, y, left+plotPanelW, y)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%s ms</text>`+"\n", left-5, y+4, trimFloat(math.Pow(10, d)))
	}
	for _, c := range cs {
		x := px(c)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", x, top, x, top+plotPanelH)
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%d</text>`+"\n", x, top+plotPanelH+15, c)
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">requests in flight (C)</text>`+"\n", left+plotPanelW/2, top+plotPanelH+32)
	for i, name := range names {
		color := plotColors[i%len(plotColors)]
		rows := lines[name]
		slices.SortFunc(rows, func(a, b SweepRow) int { return a.Concurrency - b.Concurrency })
		var pts []string
		for _, row := range rows {
			x, y := px(row.Concurrency), py(*row.P99MS)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s C=%d p99 %.2f ms</title></circle>`+"\n",
				x, y, color, html.EscapeString(name), row.Concurrency, *row.P99MS)
		}
		dash := ""
		if name == FloorName || name == PlainMCPName {
			dash = ` stroke-dasharray="5,3"`
		}
		fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), color, dash)
		ly := top + 10 + i*18
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", left+plotPanelW+12, ly, left+plotPanelW+32, ly, color, dash)
		fmt.Fprintf(b, `<text x="%d" y="%d">%s</text>`+"\n", left+plotPanelW+37, ly+4, html.EscapeString(name))
	}
}

// trimFloat prints a power of ten without trailing zeros (0.1, 1, 100).
func trimFloat(v float64) string {
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
}
