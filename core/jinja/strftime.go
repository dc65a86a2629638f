package jinja

import (
	"strconv"
	"strings"
	"time"
)

// strftime formats t as Python's datetime.strftime does on Linux (glibc,
// C locale), for the directives templates use. "%-d" and friends (glibc's
// unpadded forms) work too. strftime_now formats the render's time.
func (r *renderer) strftime(format string, t time.Time) (string, error) {
	if err := r.alloc(int64(len(format)) * 16); err != nil {
		return "", err
	}
	var b strings.Builder
	pad := func(n, width int, unpadded bool) string {
		s := strconv.Itoa(n)
		if unpadded {
			return s
		}
		for len(s) < width {
			s = "0" + s
		}
		return s
	}
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 >= len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		unpadded := false
		if format[i] == '-' && i+1 < len(format) {
			unpadded = true
			i++
		}
		hour12 := t.Hour() % 12
		if hour12 == 0 {
			hour12 = 12
		}
		switch format[i] {
		case 'Y':
			b.WriteString(strconv.Itoa(t.Year()))
		case 'y':
			b.WriteString(pad(t.Year()%100, 2, unpadded))
		case 'm':
			b.WriteString(pad(int(t.Month()), 2, unpadded))
		case 'd':
			b.WriteString(pad(t.Day(), 2, unpadded))
		case 'e':
			s := strconv.Itoa(t.Day())
			if len(s) < 2 && !unpadded {
				s = " " + s
			}
			b.WriteString(s)
		case 'H':
			b.WriteString(pad(t.Hour(), 2, unpadded))
		case 'I':
			b.WriteString(pad(hour12, 2, unpadded))
		case 'M':
			b.WriteString(pad(t.Minute(), 2, unpadded))
		case 'S':
			b.WriteString(pad(t.Second(), 2, unpadded))
		case 'f':
			b.WriteString(pad(t.Nanosecond()/1000, 6, false))
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'b', 'h':
			b.WriteString(t.Month().String()[:3])
		case 'B':
			b.WriteString(t.Month().String())
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'w':
			b.WriteString(strconv.Itoa(int(t.Weekday())))
		case 'u':
			wd := int(t.Weekday())
			if wd == 0 {
				wd = 7
			}
			b.WriteString(strconv.Itoa(wd))
		case 'j':
			b.WriteString(pad(t.YearDay(), 3, unpadded))
		case 'U', 'W':
			// Week of the year, its first Sunday (U) or Monday (W)
			// starting week 1.
			wd := int(t.Weekday())
			if format[i] == 'W' {
				wd = (wd + 6) % 7
			}
			b.WriteString(pad((t.YearDay()+6-wd)/7, 2, unpadded))
		case 'G':
			y, _ := t.ISOWeek()
			b.WriteString(strconv.Itoa(y))
		case 'V':
			_, w := t.ISOWeek()
			b.WriteString(pad(w, 2, unpadded))
		case 'c':
			s, _ := r.strftime("%a %b %e %H:%M:%S %Y", t)
			b.WriteString(s)
		case 'x':
			s, _ := r.strftime("%m/%d/%y", t)
			b.WriteString(s)
		case 'X', 'T':
			s, _ := r.strftime("%H:%M:%S", t)
			b.WriteString(s)
		case 'D':
			s, _ := r.strftime("%m/%d/%y", t)
			b.WriteString(s)
		case 'F':
			s, _ := r.strftime("%Y-%m-%d", t)
			b.WriteString(s)
		case 'R':
			s, _ := r.strftime("%H:%M", t)
			b.WriteString(s)
		case 'z', 'Z':
			// A naive datetime (datetime.now()) has no zone.
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			if unpadded {
				b.WriteByte('-')
			}
			b.WriteByte(format[i])
		}
	}
	return b.String(), nil
}
