package sim

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// Series is one line of a plot.
type Series struct {
	Name string
	X, Y []float64
}

var palette = []string{"#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#17becf", "#bcbd22"}

// PlotSVG writes a line chart of the series as a standalone SVG: axes with
// five ticks, one coloured line with markers per series, a legend. Pure Go,
// so the harness needs no plotting package.
func PlotSVG(w io.Writer, title, xlabel, ylabel string, series []Series) error {
	const W, H, L, R, T, B = 760.0, 460.0, 70.0, 170.0, 40.0, 55.0
	x0, x1, y0, y1 := math.Inf(1), math.Inf(-1), 0.0, math.Inf(-1)
	for _, s := range series {
		for i := range s.X {
			x0, x1, y1 = math.Min(x0, s.X[i]), math.Max(x1, s.X[i]), math.Max(y1, s.Y[i])
		}
	}
	if math.IsInf(x0, 0) {
		return fmt.Errorf("sim: nothing to plot")
	}
	if x1 == x0 {
		x1 = x0 + 1
	}
	if y1 <= y0 {
		y1 = y0 + 1
	}
	y1 *= 1.05
	px := func(x float64) float64 { return L + (x-x0)/(x1-x0)*(W-L-R) }
	py := func(y float64) float64 { return H - B - (y-y0)/(y1-y0)*(H-T-B) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" font-family="sans-serif" font-size="12">`+"\n", W, H)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%g" y="22" font-size="15" text-anchor="middle">%s</text>`+"\n", (W-R+L)/2, html.EscapeString(title))
	fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="black"/><line x1="%g" y1="%g" x2="%g" y2="%g" stroke="black"/>`+"\n",
		L, H-B, W-R, H-B, L, T, L, H-B)
	for i := 0; i <= 4; i++ {
		xv, yv := x0+(x1-x0)*float64(i)/4, y0+(y1-y0)*float64(i)/4
		fmt.Fprintf(&b, `<text x="%.1f" y="%g" text-anchor="middle">%.3g</text><line x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="#ddd"/>`+"\n", px(xv), H-B+18, xv, px(xv), T, px(xv), H-B)
		fmt.Fprintf(&b, `<text x="%g" y="%.1f" text-anchor="end">%.3g</text><line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="#ddd"/>`+"\n", L-6, py(yv)+4, yv, L, py(yv), W-R, py(yv))
	}
	fmt.Fprintf(&b, `<text x="%g" y="%g" text-anchor="middle">%s</text>`+"\n", (W-R+L)/2, H-12, html.EscapeString(xlabel))
	fmt.Fprintf(&b, `<text transform="translate(18,%g) rotate(-90)" text-anchor="middle">%s</text>`+"\n", (H-B+T)/2, html.EscapeString(ylabel))
	for k, s := range series {
		c := palette[k%len(palette)]
		var pts []string
		for i := range s.X {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(s.X[i]), py(s.Y[i])))
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`, px(s.X[i]), py(s.Y[i]), c)
		}
		fmt.Fprintf(&b, "\n"+`<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", c, strings.Join(pts, " "))
		ly := T + 10 + float64(k)*18
		fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="%s" stroke-width="3"/><text x="%g" y="%g">%s</text>`+"\n",
			W-R+12, ly, W-R+32, ly, c, W-R+38, ly+4, html.EscapeString(s.Name))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// PlotRows draws one metric of a sweep's rows against request rate, one
// line per policy in order of first appearance.
func PlotRows(w io.Writer, title, ylabel string, rows []Row, metric func(Row) float64) error {
	var order []string
	by := map[string]*Series{}
	for _, r := range rows {
		s := by[r.Policy]
		if s == nil {
			s = &Series{Name: r.Policy}
			by[r.Policy] = s
			order = append(order, r.Policy)
		}
		s.X, s.Y = append(s.X, r.Rate), append(s.Y, metric(r))
	}
	var ss []Series
	for _, n := range order {
		ss = append(ss, *by[n])
	}
	return PlotSVG(w, title, "request rate (requests/s)", ylabel, ss)
}
