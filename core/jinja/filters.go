package jinja

import (
	"math"
	"math/bits"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// filterFunc is a filter: its operand and its arguments.
type filterFunc func(r *renderer, v Value, a *callArgs) (Value, error)

// filters are jinja2's builtin filters that chat templates use, with
// transformers' tojson in place of jinja2's.
var filters map[string]filterFunc

func init() {
	filters = map[string]filterFunc{
		"abs":        filterAbs,
		"attr":       filterAttr,
		"batch":      filterBatch,
		"capitalize": filterStrMethod("capitalize"),
		"center":     filterCenter,
		"count":      filterLength,
		"length":     filterLength,
		"default":    filterDefault,
		"d":          filterDefault,
		"dictsort":   filterDictsort,
		"escape":     filterEscape,
		"e":          filterEscape,
		"forceescape": func(r *renderer, v Value, a *callArgs) (Value, error) {
			s, err := r.toStr(v)
			return Markup(htmlEscape(s)), err
		},
		"first":      filterFirst,
		"last":       filterLast,
		"float":      filterFloat,
		"format":     filterFormat,
		"groupby":    filterGroupby,
		"indent":     filterIndent,
		"int":        filterInt,
		"items":      filterItems,
		"join":       filterJoin,
		"list":       filterList,
		"lower":      filterStrMethod("lower"),
		"upper":      filterStrMethod("upper"),
		"title":      filterTitle,
		"map":        filterMap,
		"max":        filterMinMax(true),
		"min":        filterMinMax(false),
		"reject":     filterSelect(false, false),
		"rejectattr": filterSelect(false, true),
		"select":     filterSelect(true, false),
		"selectattr": filterSelect(true, true),
		"replace":    filterReplace,
		"reverse":    filterReverse,
		"round":      filterRound,
		"safe":       filterSafe,
		"slice":      filterSlice,
		"sort":       filterSort,
		"string":     filterString,
		"sum":        filterSum,
		"tojson":     filterTojson,
		"trim":       filterTrim,
		"truncate":   filterTruncate,
		"unique":     filterUnique,
		"wordcount":  filterWordcount,
	}
}

// filterStrMethod is a filter that is str(value).method().
func filterStrMethod(name string) filterFunc {
	return func(r *renderer, v Value, a *callArgs) (Value, error) {
		s, err := r.softStr(v)
		if err != nil {
			return nil, err
		}
		return strMethods[name](r, s, a)
	}
}

// softStr is jinja2's soft_str: str(v), keeping Markup Markup.
func (r *renderer) softStr(v Value) (Value, error) {
	if m, ok := v.(Markup); ok {
		return m, nil
	}
	return r.toStr(v)
}

// filterTitle is jinja2's title, not str.title: each word (split at
// runs of whitespace, "-", and opening brackets) with its first character
// upper-cased and the rest lower-cased, so "it's" stays "It's".
func filterTitle(r *renderer, v Value, a *callArgs) (Value, error) {
	sv, err := r.softStr(v)
	if err != nil {
		return nil, err
	}
	s, _ := isString(sv)
	if err := r.alloc(int64(len(s))); err != nil {
		return nil, err
	}
	isSep := func(c rune) bool { return isPySpace(c) || strings.ContainsRune("-({[<", c) }
	var b strings.Builder
	atStart := true
	for _, c := range s {
		switch {
		case isSep(c):
			b.WriteRune(c)
			atStart = true
		case atStart:
			b.WriteString(strings.ToUpper(string(c)))
			atStart = false
		default:
			b.WriteString(strings.ToLower(string(c)))
		}
	}
	return withKind(sv, b.String()), nil
}

func filterAbs(r *renderer, v Value, a *callArgs) (Value, error) {
	i, f, isInt, ok := number(v)
	switch {
	case !ok:
		return nil, typeErrorf("bad operand type for abs(): '%s'", typeName(v))
	case isInt && i == math.MinInt64:
		return nil, errorf(kindOverflow, "integer result of abs is too large")
	case isInt && i < 0:
		return -i, nil
	case isInt:
		return i, nil
	}
	return math.Abs(f), nil
}

func filterAttr(r *renderer, v Value, a *callArgs) (Value, error) {
	args, err := a.bind("attr", "name")
	if err != nil {
		return nil, err
	}
	name, ok := isString(args[0])
	if !ok {
		return nil, typeErrorf("attribute name must be string")
	}
	if u, ok := v.(Undefined); ok {
		return nil, u.err()
	}
	if got, found := r.pyAttr(v, name); found {
		return got, nil
	}
	return undefinedAttr(v, name), nil
}

func filterBatch(r *renderer, v Value, a *callArgs) (Value, error) {
	args, err := a.bind("batch", "linecount", "fill_with")
	if err != nil {
		return nil, err
	}
	n, _, isInt, ok := number(args[0])
	if !ok || !isInt {
		return nil, typeErrorf("batch size must be an integer")
	}
	if n <= 0 {
		return nil, errorf(kindValue, "batch size must be positive")
	}
	items, err := r.iterate(v)
	if err != nil {
		return nil, err
	}
	if err := r.allocItems(int64(len(items))*2+n, itemBytes); err != nil {
		return nil, err
	}
	var out []Value
	for i := 0; i < len(items); i += int(n) {
		end := min(i+int(n), len(items))
		chunk := append([]Value(nil), items[i:end]...)
		if end-i < int(n) && !isMissing(args[1]) && args[1] != nil {
			for len(chunk) < int(n) {
				chunk = append(chunk, args[1])
			}
		}
		out = append(out, NewList(chunk))
	}
	return &Generator{items: out, name: "do_batch"}, nil
}

func filterCenter(r *renderer, v Value, a *callArgs) (Value, error) {
	args, err := a.bind("center", "width")
	if err != nil {
		return nil, err
	}
	s, err := r.softStr(v)
	if err != nil {
		return nil, err
	}
	return strMethods["center"](r, s, &callArgs{pos: []Value{orDefault(args[0], int64(80))}})
}

func filterLength(r *renderer, v Value, a *callArgs) (Value, error) {
	n, err := length(v)
	return int64(n), err
}

func filterDefault(r *renderer, v Value, a *callArgs) (Value, error) {
	args, err := a.bind("default", "default_value", "boolean")
	if err != nil {
		return nil, err
	}
	def := orDefault(args[0], "")
	if _, undef := v.(Undefined); undef || (truthy(orDefault(args[1], false)) && !truthy(v)) {
		return def, nil
	}
	return v, nil
}

func filterDictsort(r *renderer, v Value, a *callArgs) (Value, error) {
	args, err := a.bind("dictsort", "case_sensitive", "by", "reverse")
	if err != nil {
		return nil, err
	}
	d, ok := v.(*Dict)
	if !ok {
		return nil, errorf(kindRuntime, "You can only sort by either \"key\" or \"value\"")
	}
	pos := 0
	if by := orDefault(args[1], "key"); by == "value" {
		pos = 1
	} else if by != "key" {
		return nil, errorf(kindRuntime, "You can only sort by either \"key\" or \"value\"")
	}
	if err := r.allocItems(int64(d.Len()), itemBytes+64); err != nil {
		return nil, err
	}
	items := make([]Value, d.Len())
	for i, k := range d.keys {
		items[i] = newTuple(k, d.vals[i])
	}
	caseSensitive := truthy(orDefault(args[0], false))
	key := func(it Value) (Value, error) {
		kv := it.(*List).Items[pos]
		if !caseSensitive {
			return ignoreCase(kv), nil
		}
		return kv, nil
	}
	if err := r.sortValues(items, key, truthy(orDefault(args[2], false))); err != nil {
		return nil, err
	}
	return NewList(items), nil
}

// ignoreCase is the sort key of a case-insensitive comparison.
func ignoreCase(v Value) Value {
	if s, ok := v.(string); ok {
		return strings.ToLower(s)
	}
	return v
}

// sortValues sorts items in place, stably, by key, as Python's sorted:
// comparing unorderable keys is a TypeError.
func (r *renderer) sortValues(items []Value, key func(Value) (Value, error), reverse bool) error {
	keys := make([]Value, len(items))
	for i, it := range items {
		k, err := key(it)
		if err != nil {
			return err
		}
		keys[i] = k
	}
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	var sortErr error
	// n log n comparisons.
	if err := r.spend(int64(len(items)) * int64(bits.Len(uint(len(items))))); err != nil {
		return err
	}
	sort.SliceStable(idx, func(i, j int) bool {
		if sortErr != nil {
			return false
		}
		a, b := keys[idx[i]], keys[idx[j]]
		if reverse {
			a, b = b, a
		}
		lt, err := r.less(a, b, "<", 0)
		if err != nil {
			sortErr = err
		}
		return lt
	})
	if sortErr != nil {
		return sortErr
	}
	sorted := make([]Value, len(items))
	for i, k := range idx {
		sorted[i] = items[k]
	}
	copy(items, sorted)
	return nil
}

func filterEscape(r *renderer, v Value, a *callArgs) (Value, error) {
	if m, ok := v.(Markup); ok {
		return m, nil
	}
	s, err := r.toStr(v)
	if err != nil {
		return nil, err
	}
	if err := r.alloc(int64(escapedLen(s))); err != nil {
		return nil, err
	}
	return Markup(htmlEscape(s)), nil
}

func filterFirst(r *renderer, v Value, a *callArgs) (Value, error) {
	if g, ok := v.(*Generator); ok {
		if g.used || len(g.items) == 0 {
			g.used = true
			return Undefined{msg: "No first item, sequence was empty.", kind: kindUndefined}, nil
		}
		g.used = true // a generator's first item is consumed; the rest, here, too
		return g.items[0], nil
	}
	items, err := r.iterate(v)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return Undefined{msg: "No first item, sequence was empty.", kind: kindUndefined}, nil
	}
	return items[0], nil
}

func filterLast(r *renderer, v Value, a *callArgs) (Value, error) {
	switch v.(type) {
	case *Generator:
		return nil, typeErrorf("'generator' object is not reversible")
	}
	items, err := r.iterate(v)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return Undefined{msg: "No last item, sequence was empty.", kind: kindUndefined}, nil
	}
	return items[len(items)-1], nil
}

func filterFloat(r *renderer, v Value, a *callArgs) (Value, error) {
	args, err := a.bind("float", "default")
	if err != nil {
		return nil, err
	}
	def := orDefault(args[0], 0.0)
	if _, f, _, ok := number(v); ok {
		return f, nil
	}
	if s, ok := isString(v); ok {
		if f, ok := parsePyFloat(s); ok {
			return f, nil
		}
	}
	return def, nil
}

// parsePyFloat is Python's float(str): surrounding whitespace and "_"
// between digits allowed, inf and nan spelled out.
func parsePyFloat(s string) (float64, bool) {
	s = pyStrip(s)
	if strings.Contains(s, "__") || strings.HasPrefix(s, "_") || strings.HasSuffix(s, "_") {
		return 0, false
	}
	lower := strings.ToLower(strings.TrimLeft(s, "+-"))
	switch lower {
	case "inf", "infinity", "nan":
	default:
		if strings.ContainsAny(lower, "xpn") || lower == "" {
			return 0, false
		}
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64)
	if err != nil && !isRangeErr(err) {
		return 0, false
	}
	return f, true
}

func filterFormat(r *renderer, v Value, a *callArgs) (Value, error) {
	s, err := r.softStr(v)
	if err != nil {
		return nil, err
	}
	var arg Value
	if len(a.kwNames) > 0 {
		d := NewDict()
		for i, n := range a.kwNames {
			d.SetString(n, a.kwVals[i])
		}
		arg = d
	} else {
		arg = newTuple(a.pos...)
	}
	str, _ := isString(s)
	return r.percentFormat(str, arg, false)
}

func filterGroupby(r *renderer, v Value, a *callArgs) (Value, error) {
	args, err := a.bind("groupby", "attribute", "default", "case_sensitive")
	if err != nil {
		return nil, err
	}
	get, err := r.attrGetter(args[0], args[1], !truthy(orDefault(args[2], false)))
	if err != nil {
		return nil, err
	}
	items, err := r.iterate(v)
	if err != nil {
		return nil, err
	}
	sorted := append([]Value(nil), items...)
	if err := r.sortValues(sorted, get, false); err != nil {
		return nil, err
	}
	var groups []Value
	var cur *List
	var curKey Value
	for _, it := range sorted {
		k, err := get(it)
		if err != nil {
			return nil, err
		}
		if cur != nil {
			if eq, err := r.equal(k, curKey, 0); err != nil {
				return nil, err
			} else if eq {
				cur.Items = append(cur.Items, it)
				continue
			}
		}
		cur, curKey = NewList([]Value{it}), k
		groups = append(groups, newTuple(k, cur))
	}
	return NewList(groups), nil
}

func filterIndent(r *renderer, v Value, a *callArgs) (Value, error) {
	args, err := a.bind("indent", "width", "first", "blank")
	if err != nil {
		return nil, err
	}
	s, err := r.toStr(v)
	if err != nil {
		return nil, err
	}
	indent := "    "
	switch w := orDefault(args[0], int64(4)).(type) {
	case string:
		indent = w
	default:
		n, _, isInt, ok := number(w)
		if !ok || !isInt {
			return nil, typeErrorf("can't multiply sequence by non-int of type '%s'", typeName(w))
		}
		if n < 0 {
			n = 0
		}
		if n > int64(r.lim.Output) {
			return nil, r.fail("the template would indent by %d characters; at most %d bytes are allowed", n, r.lim.Output)
		}
		if err := r.alloc(n); err != nil {
			return nil, err
		}
		indent = strings.Repeat(" ", int(n))
	}
	first, blank := truthy(orDefault(args[1], false)), truthy(orDefault(args[2], false))
	// jinja2 appends a newline and splits into lines; every line after
	// the first may gain an indent. The size is known before the text is
	// built: count the lines first.
	s += "\n"
	lines := int64(0)
	for rest := s; rest != ""; lines++ {
		rest = cutLine(rest)
	}
	if err := r.scan(len(s)); err != nil {
		return nil, err
	}
	if err := r.alloc(int64(len(s)) + lines*int64(len(indent)+1)); err != nil {
		return nil, err
	}
	var b strings.Builder
	if first {
		b.WriteString(indent)
	}
	for i, rest := 0, s; rest != ""; i++ {
		next := cutLine(rest)
		line := rest[:len(rest)-len(next)]
		line = strings.TrimRightFunc(line, isLineBreak) // one break, or \r\n
		if i > 0 {
			b.WriteByte('\n')
			if blank || line != "" {
				b.WriteString(indent)
			}
		}
		b.WriteString(line)
		rest = next
	}
	if _, ok := v.(Markup); ok {
		return Markup(b.String()), nil
	}
	return b.String(), nil
}

// cutLine returns what follows the first line of s and its line break,
// as str.splitlines divides.
func cutLine(s string) string {
	i := strings.IndexFunc(s, isLineBreak)
	if i < 0 {
		return ""
	}
	c, size := utf8.DecodeRuneInString(s[i:])
	end := i + size
	if c == '\r' && end < len(s) && s[end] == '\n' {
		end++
	}
	return s[end:]
}

func filterInt(r *renderer, v Value, a *callArgs) (Value, error) {
	args, err := a.bind("int", "default", "base")
	if err != nil {
		return nil, err
	}
	def := orDefault(args[0], int64(0))
	base := int64(10)
	if b, _, isInt, ok := number(orDefault(args[1], int64(10))); ok && isInt {
		base = b
	}
	switch x := v.(type) {
	case bool:
		if x {
			return int64(1), nil
		}
		return int64(0), nil
	case int64:
		return x, nil
	case float64:
		if math.IsNaN(x) {
			return def, nil
		}
		if math.IsInf(x, 0) || math.Abs(x) >= 1<<63 {
			return nil, errorf(kindOverflow, "cannot convert float infinity to integer")
		}
		return int64(x), nil
	case string, Markup:
		s, _ := isString(x)
		if n, ok := parsePyInt(s, int(base)); ok {
			return n, nil
		}
		if f, ok := parsePyFloat(s); ok && !math.IsInf(f, 0) && !math.IsNaN(f) && math.Abs(f) < 1<<63 {
			return int64(f), nil
		}
	}
	return def, nil
}

// parsePyInt is Python's int(str, base) for bases 2..36 (and 0).
func parsePyInt(s string, base int) (int64, bool) {
	s = pyStrip(s)
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg, s = s[0] == '-', s[1:]
	}
	if len(s) > 2 && s[0] == '0' {
		p := s[1] | 0x20
		if (p == 'x' && (base == 16 || base == 0)) || (p == 'o' && (base == 8 || base == 0)) || (p == 'b' && (base == 2 || base == 0)) {
			s = strings.TrimPrefix(s[2:], "_")
			base = map[byte]int{'x': 16, 'o': 8, 'b': 2}[p]
		}
	}
	if base == 0 {
		base = 10
	}
	if s == "" || s[0] == '_' || s[len(s)-1] == '_' || strings.Contains(s, "__") || base < 2 || base > 36 {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), base, 64)
	if err != nil {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

func filterItems(r *renderer, v Value, a *callArgs) (Value, error) {
	switch d := v.(type) {
	case Undefined:
		return &Generator{name: "do_items"}, nil
	case *Dict:
		items, err := dictView(kindDictItems)(r, d, &callArgs{})
		if err != nil {
			return nil, err
		}
		return &Generator{items: items.(*List).Items, name: "do_items"}, nil
	}
	return nil, typeErrorf("Can only get item pairs from a mapping.")
}

func filterJoin(r *renderer, v Value, a *callArgs) (Value, error) {
	args, err := a.bind("join", "d", "attribute")
	if err != nil {
		return nil, err
	}
	items, err := r.iterate(v)
	if err != nil {
		return nil, err
	}
	if !isMissing(args[1]) && args[1] != nil {
		get, err := r.attrGetter(args[1], nil, false)
		if err != nil {
			return nil, err
		}
		mapped := make([]Value, len(items))
		for i, it := range items {
			if mapped[i], err = get(it); err != nil {
				return nil, err
			}
		}
		items = mapped
	}
	sep, err := r.toStr(orDefault(args[0], ""))
	if err != nil {
		return nil, err
	}
	parts := make([]string, len(items))
	for i, it := range items {
		if parts[i], err = r.toStr(it); err != nil {
			return nil, err
		}
	}
	return r.join(parts, sep)
}

func filterList(r *renderer, v Value, a *callArgs) (Value, error) {
	items, err := r.iterate(v)
	if err != nil {
		return nil, err
	}
	if err := r.allocItems(int64(len(items)), itemBytes); err != nil {
		return nil, err
	}
	return NewList(append([]Value(nil), items...)), nil
}

// attrGetter is jinja2's make_attrgetter: "a.b.0" looks up a, then b,
// then item 0; default replaces an undefined result; lower lowercases
// strings (case-insensitive comparisons).
func (r *renderer) attrGetter(attr Value, def Value, lower bool) (func(Value) (Value, error), error) {
	var parts []Value
	switch x := attr.(type) {
	case string:
		for _, p := range strings.Split(x, ".") {
			if n, err := strconv.ParseInt(p, 10, 64); err == nil && p != "" && p[0] >= '0' && p[0] <= '9' {
				parts = append(parts, n)
			} else {
				parts = append(parts, p)
			}
		}
	case int64:
		parts = []Value{x}
	case nil, missing:
	default:
		parts = []Value{x}
	}
	return func(it Value) (Value, error) {
		v := it
		for _, p := range parts {
			var err error
			if v, err = r.getItem(v, p); err != nil {
				return nil, err
			}
		}
		if _, undef := v.(Undefined); undef && def != nil && !isMissing(def) {
			v = def
		}
		if lower {
			v = ignoreCase(v)
		}
		return v, nil
	}, nil
}

func filterMap(r *renderer, v Value, a *callArgs) (Value, error) {
	if !truthy(v) { // jinja2 looks at neither the arguments nor the items then
		return &Generator{name: "sync_do_map"}, nil
	}
	items, err := r.iterate(v)
	if err != nil {
		return nil, err
	}
	var fn func(Value) (Value, error)
	if len(a.pos) == 0 {
		args, err := a.bind("map", "attribute", "default")
		if err != nil {
			return nil, err
		}
		if isMissing(args[0]) {
			return nil, errorf(kindRuntime, "map requires a filter argument")
		}
		if fn, err = r.attrGetter(args[0], args[1], false); err != nil {
			return nil, err
		}
	} else {
		name, ok := isString(a.pos[0])
		if !ok {
			return nil, typeErrorf("map filter name must be a string")
		}
		f, ok := filters[name]
		if !ok {
			return nil, errorf(kindRuntime, "No filter named '%s' found.", name)
		}
		rest := &callArgs{pos: a.pos[1:], kwNames: a.kwNames, kwVals: a.kwVals}
		fn = func(it Value) (Value, error) { return f(r, it, rest) }
	}
	if err := r.allocItems(int64(len(items)), itemBytes); err != nil {
		return nil, err
	}
	out := make([]Value, len(items))
	for i, it := range items {
		if err := r.step(); err != nil {
			return nil, err
		}
		if out[i], err = fn(it); err != nil {
			return nil, err
		}
	}
	return &Generator{items: out, name: "sync_do_map"}, nil
}

func filterMinMax(isMax bool) filterFunc {
	return func(r *renderer, v Value, a *callArgs) (Value, error) {
		args, err := a.bind("max", "case_sensitive", "attribute")
		if err != nil {
			return nil, err
		}
		items, err := r.iterate(v)
		if err != nil {
			return nil, err
		}
		if len(items) == 0 {
			return Undefined{msg: "No aggregated item, sequence was empty.", kind: kindUndefined}, nil
		}
		get, err := r.attrGetter(orDefault(args[1], nil), nil, !truthy(orDefault(args[0], false)))
		if err != nil {
			return nil, err
		}
		best, bestKey := items[0], Value(nil)
		if bestKey, err = get(best); err != nil {
			return nil, err
		}
		for _, it := range items[1:] {
			k, err := get(it)
			if err != nil {
				return nil, err
			}
			var better bool
			if isMax {
				better, err = r.less(bestKey, k, ">", 0)
			} else {
				better, err = r.less(k, bestKey, "<", 0)
			}
			if err != nil {
				return nil, err
			}
			if better {
				best, bestKey = it, k
			}
		}
		return best, nil
	}
}

// filterSelect is select/reject (by a test on each item) and
// selectattr/rejectattr (by a test on an attribute of each item).
func filterSelect(keep, byAttr bool) filterFunc {
	return func(r *renderer, v Value, a *callArgs) (Value, error) {
		if !truthy(v) { // jinja2 looks at neither the arguments nor the items then
			return &Generator{name: "select_or_reject"}, nil
		}
		items, err := r.iterate(v)
		if err != nil {
			return nil, err
		}
		pos := a.pos
		get := func(it Value) (Value, error) { return it, nil }
		if byAttr {
			if len(pos) == 0 {
				return nil, typeErrorf("Missing parameter for attribute name")
			}
			if get, err = r.attrGetter(pos[0], nil, false); err != nil {
				return nil, err
			}
			pos = pos[1:]
		}
		test := func(x Value) (bool, error) { return truthy(x), nil }
		if len(pos) > 0 {
			name, ok := isString(pos[0])
			if !ok {
				return nil, typeErrorf("test name must be a string")
			}
			t, ok := tests[name]
			if !ok {
				return nil, errorf(kindRuntime, "No test named '%s' found.", name)
			}
			rest := &callArgs{pos: pos[1:], kwNames: a.kwNames, kwVals: a.kwVals}
			test = func(x Value) (bool, error) { return t(r, x, rest) }
		}
		var out []Value
		for _, it := range items {
			if err := r.step(); err != nil {
				return nil, err
			}
			x, err := get(it)
			if err != nil {
				return nil, err
			}
			ok, err := test(x)
			if err != nil {
				return nil, err
			}
			if ok == keep {
				out = append(out, it)
			}
		}
		if err := r.allocItems(int64(len(out)), itemBytes); err != nil {
			return nil, err
		}
		return &Generator{items: out, name: "select_or_reject"}, nil
	}
}

func filterReplace(r *renderer, v Value, a *callArgs) (Value, error) {
	args, err := a.bind("replace", "old", "new", "count")
	if err != nil {
		return nil, err
	}
	s, err := r.softStr(v)
	if err != nil {
		return nil, err
	}
	old, err := r.toStr(orDefault(args[0], ""))
	if err != nil {
		return nil, err
	}
	nw, err := r.toStr(orDefault(args[1], ""))
	if err != nil {
		return nil, err
	}
	count := int64(-1)
	if c := orDefault(args[2], nil); c != nil {
		n, _, isInt, ok := number(c)
		if !ok || !isInt {
			return nil, typeErrorf("'%s' object cannot be interpreted as an integer", typeName(c))
		}
		count = n
	}
	if m, ok := s.(Markup); ok {
		if _, plain := args[0].(string); plain {
			old = htmlEscape(old)
		}
		if _, plain := args[1].(string); plain {
			nw = htmlEscape(nw)
		}
		out, err := r.replace(string(m), old, nw, count)
		return Markup(out), err
	}
	return r.replace(s.(string), old, nw, count)
}

func filterReverse(r *renderer, v Value, a *callArgs) (Value, error) {
	if s, ok := isString(v); ok {
		if err := r.alloc(int64(len(s))); err != nil {
			return nil, err
		}
		runes := []rune(s)
		for i, j := 0, len(runes)-1; i < j; i, j = i+1, j-1 {
			runes[i], runes[j] = runes[j], runes[i]
		}
		return withKind(v, string(runes)), nil
	}
	items, err := r.iterate(v)
	if err != nil {
		return nil, err
	}
	if err := r.allocItems(int64(len(items)), itemBytes); err != nil {
		return nil, err
	}
	out := make([]Value, len(items))
	for i, it := range items {
		out[len(items)-1-i] = it
	}
	return &Generator{items: out, name: "reversed"}, nil
}

func filterRound(r *renderer, v Value, a *callArgs) (Value, error) {
	args, err := a.bind("round", "precision", "method")
	if err != nil {
		return nil, err
	}
	prec, _, isInt, ok := number(orDefault(args[0], int64(0)))
	if !ok || !isInt {
		return nil, typeErrorf("precision must be an integer")
	}
	method, _ := orDefault(args[1], "common").(string)
	i, f, vInt, ok := number(v)
	if !ok {
		return nil, typeErrorf("type %s doesn't define __round__ method", typeName(v))
	}
	scale := math.Pow(10, float64(prec))
	switch method {
	case "common":
		if vInt && prec >= 0 {
			return i, nil
		}
		return pyRound(f, int(prec)), nil
	case "ceil":
		return math.Ceil(f*scale) / scale, nil
	case "floor":
		return math.Floor(f*scale) / scale, nil
	}
	return nil, errorf(kindRuntime, "method must be common, ceil or floor")
}

// pyRound is Python's round(x, n) for floats: to the nearest, ties to
// even, on the decimal value the float shows.
func pyRound(x float64, n int) float64 {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return x
	}
	s := strconv.FormatFloat(x, 'f', n, 64) // correctly rounded, ties to even on the exact binary value
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

func filterSafe(r *renderer, v Value, a *callArgs) (Value, error) {
	s, err := r.toStr(v)
	return Markup(s), err
}

func filterSlice(r *renderer, v Value, a *callArgs) (Value, error) {
	args, err := a.bind("slice", "slices", "fill_with")
	if err != nil {
		return nil, err
	}
	n, _, isInt, ok := number(args[0])
	if !ok || !isInt || n <= 0 {
		return nil, errorf(kindValue, "slices must be a positive integer")
	}
	items, err := r.iterate(v)
	if err != nil {
		return nil, err
	}
	if err := r.allocItems(int64(len(items))+n, itemBytes); err != nil {
		return nil, err
	}
	per, extra := len(items)/int(n), len(items)%int(n)
	var out []Value
	offset := 0
	for i := 0; i < int(n); i++ {
		start := offset + i*per
		if i < extra {
			offset++
		}
		end := offset + (i+1)*per
		chunk := append([]Value(nil), items[start:end]...)
		if !isMissing(args[1]) && args[1] != nil && i >= extra && extra > 0 {
			chunk = append(chunk, args[1])
		}
		out = append(out, NewList(chunk))
	}
	return &Generator{items: out, name: "sync_do_slice"}, nil
}

func filterSort(r *renderer, v Value, a *callArgs) (Value, error) {
	args, err := a.bind("sort", "reverse", "case_sensitive", "attribute")
	if err != nil {
		return nil, err
	}
	items, err := r.iterate(v)
	if err != nil {
		return nil, err
	}
	if err := r.allocItems(int64(len(items)), itemBytes); err != nil {
		return nil, err
	}
	out := append([]Value(nil), items...)
	// attribute may name several, "age,name": the key is their tuple.
	var getters []func(Value) (Value, error)
	attrs := []Value{orDefault(args[2], nil)}
	if s, ok := attrs[0].(string); ok {
		attrs = nil
		for _, part := range strings.Split(s, ",") {
			attrs = append(attrs, part)
		}
	}
	for _, at := range attrs {
		g, err := r.attrGetter(at, nil, !truthy(orDefault(args[1], false)))
		if err != nil {
			return nil, err
		}
		getters = append(getters, g)
	}
	get := getters[0]
	if len(getters) > 1 {
		get = func(it Value) (Value, error) {
			key := make([]Value, len(getters))
			for i, g := range getters {
				k, err := g(it)
				if err != nil {
					return nil, err
				}
				key[i] = k
			}
			return NewList(key), nil
		}
	}
	if err := r.sortValues(out, get, truthy(orDefault(args[0], false))); err != nil {
		return nil, err
	}
	return NewList(out), nil
}

func filterString(r *renderer, v Value, a *callArgs) (Value, error) { return r.softStr(v) }

func filterSum(r *renderer, v Value, a *callArgs) (Value, error) {
	args, err := a.bind("sum", "attribute", "start")
	if err != nil {
		return nil, err
	}
	items, err := r.iterate(v)
	if err != nil {
		return nil, err
	}
	get, err := r.attrGetter(orDefault(args[0], nil), nil, false)
	if err != nil {
		return nil, err
	}
	total := orDefault(args[1], int64(0))
	for _, it := range items {
		x, err := get(it)
		if err != nil {
			return nil, err
		}
		if total, err = r.binary("+", total, x); err != nil {
			return nil, err
		}
	}
	return total, nil
}

func filterTrim(r *renderer, v Value, a *callArgs) (Value, error) {
	args, err := a.bind("trim", "chars")
	if err != nil {
		return nil, err
	}
	s, err := r.softStr(v)
	if err != nil {
		return nil, err
	}
	return strMethods["strip"](r, s, &callArgs{pos: []Value{orDefault(args[0], nil)}})
}

func filterTruncate(r *renderer, v Value, a *callArgs) (Value, error) {
	args, err := a.bind("truncate", "length", "killwords", "end", "leeway")
	if err != nil {
		return nil, err
	}
	s, err := r.toStr(v)
	if err != nil {
		return nil, err
	}
	n, _, _, _ := number(orDefault(args[0], int64(255)))
	end, err := r.toStr(orDefault(args[2], "..."))
	if err != nil {
		return nil, err
	}
	leeway, _, _, _ := number(orDefault(args[3], int64(5)))
	runes := []rune(s)
	if int64(len(runes)) <= n+leeway {
		return s, nil
	}
	cut := max(n-int64(utf8.RuneCountInString(end)), 0)
	if truthy(orDefault(args[1], false)) {
		return string(runes[:cut]) + end, nil
	}
	head := string(runes[:cut])
	if i := strings.LastIndex(head, " "); i >= 0 {
		head = head[:i]
	}
	return head + end, nil
}

func filterUnique(r *renderer, v Value, a *callArgs) (Value, error) {
	args, err := a.bind("unique", "case_sensitive", "attribute")
	if err != nil {
		return nil, err
	}
	items, err := r.iterate(v)
	if err != nil {
		return nil, err
	}
	get, err := r.attrGetter(orDefault(args[1], nil), nil, !truthy(orDefault(args[0], false)))
	if err != nil {
		return nil, err
	}
	seen := NewDict()
	var out []Value
	for _, it := range items {
		k, err := get(it)
		if err != nil {
			return nil, err
		}
		if _, dup := seen.Get(k); dup {
			continue
		}
		if err := seen.Set(k, true); err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	if err := r.allocItems(int64(len(out))*5, itemBytes); err != nil {
		return nil, err
	}
	return &Generator{items: out, name: "do_unique"}, nil
}

func filterWordcount(r *renderer, v Value, a *callArgs) (Value, error) {
	s, err := r.toStr(v)
	if err != nil {
		return nil, err
	}
	n := 0
	inWord := false
	for _, c := range s {
		word := c == '_' || isWordRune(c)
		if word && !inWord {
			n++
		}
		inWord = word
	}
	return int64(n), nil
}
