package jinja

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Python methods of str, dict and list that templates call. A list or
// dict method that would change its receiver is not here: the sandbox
// apply_chat_template uses refuses them (pyAttr returns an Undefined that
// fails with a SecurityError when called).

var mutatingListMethods = map[string]bool{
	"append": true, "clear": true, "extend": true, "insert": true,
	"pop": true, "remove": true, "reverse": true, "sort": true,
}

var mutatingDictMethods = map[string]bool{
	"clear": true, "pop": true, "popitem": true, "setdefault": true, "update": true,
}

var strMethods, dictMethods, listMethods map[string]methodFunc

func init() {
	strMethods = map[string]methodFunc{
		"strip":        strStrip(pyStrip, strings.Trim),
		"lstrip":       strStrip(pyLStrip, strings.TrimLeft),
		"rstrip":       strStrip(pyRStrip, strings.TrimRight),
		"split":        strSplit(false),
		"rsplit":       strSplit(true),
		"splitlines":   strSplitlines,
		"startswith":   strAffix(strings.HasPrefix),
		"endswith":     strAffix(strings.HasSuffix),
		"replace":      strReplace,
		"upper":        strCase(strings.ToUpper),
		"lower":        strCase(strings.ToLower),
		"casefold":     strCase(strings.ToLower),
		"title":        strCase(pyTitle),
		"capitalize":   strCase(pyCapitalize),
		"swapcase":     strCase(swapCase),
		"find":         strFind(false, false),
		"rfind":        strFind(true, false),
		"index":        strFind(false, true),
		"rindex":       strFind(true, true),
		"count":        strCount,
		"join":         strJoin,
		"format":       strFormatMethod,
		"center":       strPad("center"),
		"ljust":        strPad("ljust"),
		"rjust":        strPad("rjust"),
		"zfill":        strZfill,
		"partition":    strPartition(false),
		"rpartition":   strPartition(true),
		"removeprefix": strRemove(strings.TrimPrefix),
		"removesuffix": strRemove(strings.TrimSuffix),
		"isdigit":      strIs(unicode.IsDigit),
		"isdecimal":    strIs(unicode.IsDigit),
		"isnumeric":    strIs(unicode.IsNumber),
		"isalpha":      strIs(unicode.IsLetter),
		"isalnum":      strIs(func(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) }),
		"isspace":      strIs(isPySpace),
		"isascii":      strIsASCII,
		"isupper":      strCased(unicode.IsUpper, unicode.IsLower),
		"islower":      strCased(unicode.IsLower, unicode.IsUpper),
	}
	dictMethods = map[string]methodFunc{
		"get":    dictGet,
		"items":  dictView(kindDictItems),
		"keys":   dictView(kindDictKeys),
		"values": dictView(kindDictValues),
		"copy":   dictCopy,
	}
	listMethods = map[string]methodFunc{
		"count": listCount,
		"index": listIndex,
		"copy":  listCopy,
	}
}

func recvStr(recv Value) string { s, _ := isString(recv); return s }

// strArg is an optional str argument (None when absent or None).
func strArg(fn string, v Value) (string, bool, error) {
	if isMissing(v) || v == nil {
		return "", false, nil
	}
	s, ok := isString(v)
	if !ok {
		return "", false, typeErrorf("%s arg must be None or str", fn)
	}
	return s, true, nil
}

func strStrip(ws func(string) string, chars func(string, string) string) methodFunc {
	return func(r *renderer, recv Value, a *callArgs) (Value, error) {
		args, err := a.bind("strip", "chars")
		if err != nil {
			return nil, err
		}
		set, given, err := strArg("strip", args[0])
		if err != nil {
			return nil, err
		}
		s := recvStr(recv)
		if err := r.scan(len(s)); err != nil {
			return nil, err
		}
		if !given {
			return withKind(recv, ws(s)), nil
		}
		return withKind(recv, chars(s, set)), nil
	}
}

func strSplit(fromRight bool) methodFunc {
	return func(r *renderer, recv Value, a *callArgs) (Value, error) {
		args, err := a.bind("split", "sep", "maxsplit")
		if err != nil {
			return nil, err
		}
		sep, given, err := strArg("split", args[0])
		if err != nil {
			return nil, err
		}
		maxsplit := int64(-1)
		if v := orDefault(args[1], int64(-1)); v != nil {
			n, _, isInt, ok := number(v)
			if !ok || !isInt {
				return nil, typeErrorf("'%s' object cannot be interpreted as an integer", typeName(v))
			}
			maxsplit = n
		}
		s := recvStr(recv)
		if given && sep == "" {
			return nil, errorf(kindValue, "empty separator")
		}
		if err := r.scan(len(s)); err != nil {
			return nil, err
		}
		// The list's length is known before it is made.
		var pieces int64
		if given {
			pieces = int64(strings.Count(s, sep)) + 1
		} else { // at most one more field than there are spaces
			pieces = 1
			for _, c := range s {
				if isPySpace(c) {
					pieces++
				}
			}
		}
		if maxsplit >= 0 && maxsplit+1 < pieces {
			pieces = maxsplit + 1
		}
		if err := r.allocItems(pieces, itemBytes); err != nil {
			return nil, err
		}
		parts := pySplit(s, sep, given, maxsplit, fromRight)
		items := make([]Value, len(parts))
		for i, p := range parts {
			items[i] = withKind(recv, p)
		}
		return NewList(items), nil
	}
}

// pySplit is str.split / str.rsplit. The pieces share s's memory, so
// only the list is new.
func pySplit(s, sep string, hasSep bool, maxsplit int64, fromRight bool) []string {
	if hasSep {
		if maxsplit < 0 {
			return strings.Split(s, sep)
		}
		if !fromRight {
			return strings.SplitN(s, sep, int(min(maxsplit, int64(len(s))))+1)
		}
		var out []string
		for maxsplit > 0 {
			i := strings.LastIndex(s, sep)
			if i < 0 {
				break
			}
			out = append(out, s[i+len(sep):])
			s = s[:i]
			maxsplit--
		}
		out = append(out, s)
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
		return out
	}
	// Runs of whitespace separate; none at the ends.
	if maxsplit < 0 {
		return strings.FieldsFunc(s, isPySpace)
	}
	var out []string
	if !fromRight {
		rest := pyLStrip(s)
		for rest != "" {
			if maxsplit == 0 {
				out = append(out, rest)
				break
			}
			i := strings.IndexFunc(rest, isPySpace)
			if i < 0 {
				out = append(out, rest)
				break
			}
			out = append(out, rest[:i])
			rest = pyLStrip(rest[i:])
			maxsplit--
		}
		return out
	}
	rest := pyRStrip(s)
	for rest != "" {
		if maxsplit == 0 {
			out = append(out, rest)
			break
		}
		i := strings.LastIndexFunc(rest, isPySpace)
		if i < 0 {
			out = append(out, rest)
			break
		}
		_, size := utf8.DecodeRuneInString(rest[i:])
		out = append(out, rest[i+size:])
		rest = pyRStrip(rest[:i])
		maxsplit--
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

func strSplitlines(r *renderer, recv Value, a *callArgs) (Value, error) {
	args, err := a.bind("splitlines", "keepends")
	if err != nil {
		return nil, err
	}
	keep := truthy(orDefault(args[0], false))
	s := recvStr(recv)
	if err := r.scan(len(s)); err != nil {
		return nil, err
	}
	var items []Value
	for s != "" {
		i := strings.IndexFunc(s, isLineBreak)
		if i < 0 {
			items = append(items, withKind(recv, s))
			break
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		end := i + size
		if c == '\r' && end < len(s) && s[end] == '\n' {
			end++
		}
		if keep {
			items = append(items, withKind(recv, s[:end]))
		} else {
			items = append(items, withKind(recv, s[:i]))
		}
		s = s[end:]
	}
	if err := r.allocItems(int64(len(items)), itemBytes); err != nil {
		return nil, err
	}
	return NewList(items), nil
}

func isLineBreak(r rune) bool {
	switch r {
	case '\n', '\r', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
		return true
	}
	return false
}

// strAffix is startswith/endswith: a str or a tuple of them.
func strAffix(has func(string, string) bool) methodFunc {
	return func(r *renderer, recv Value, a *callArgs) (Value, error) {
		if len(a.pos) < 1 {
			return nil, typeErrorf("startswith() takes at least 1 argument (0 given)")
		}
		s := recvStr(recv)
		if len(a.pos) > 1 {
			sub, err := r.slice(s, a.pos[1], valueAt(a.pos, 2), nil)
			if err != nil {
				return nil, err
			}
			s = sub.(string)
		}
		check := func(v Value) (bool, error) {
			p, ok := isString(v)
			if !ok {
				return false, typeErrorf("startswith first arg must be str or a tuple of str, not %s", typeName(v))
			}
			return has(s, p), nil
		}
		if t, ok := a.pos[0].(*List); ok && t.kind == kindTuple {
			for _, it := range t.Items {
				if ok, err := check(it); err != nil || ok {
					return ok, err
				}
			}
			return false, nil
		}
		return check(a.pos[0])
	}
}

func valueAt(vs []Value, i int) Value {
	if i < len(vs) {
		return vs[i]
	}
	return nil
}

func strReplace(r *renderer, recv Value, a *callArgs) (Value, error) {
	args, err := a.bind("replace", "old", "new", "count")
	if err != nil {
		return nil, err
	}
	old, ok1 := isString(args[0])
	nw, ok2 := isString(args[1])
	if !ok1 || !ok2 {
		return nil, typeErrorf("replace() arguments must be str")
	}
	count := int64(-1)
	if v := orDefault(args[2], int64(-1)); true {
		n, _, isInt, ok := number(v)
		if !ok || !isInt {
			return nil, typeErrorf("'%s' object cannot be interpreted as an integer", typeName(v))
		}
		count = n
	}
	out, err := r.replace(recvStr(recv), old, nw, count)
	if err != nil {
		return nil, err
	}
	return withKind(recv, out), nil
}

// replace is str.replace with the result's size computed, and charged,
// before it is built.
func (r *renderer) replace(s, old, nw string, count int64) (string, error) {
	if err := r.scan(len(s)); err != nil {
		return "", err
	}
	var n int64
	if old == "" {
		n = int64(utf8.RuneCountInString(s)) + 1
	} else {
		n = int64(strings.Count(s, old))
	}
	if count >= 0 && count < n {
		n = count
	}
	size := int64(len(s)) + n*(int64(len(nw))-int64(len(old)))
	if n > 0 && int64(len(nw)) > int64(r.lim.Output)/n {
		return "", r.fail("the template would build a string of more than %d bytes", r.lim.Output)
	}
	if err := r.alloc(size); err != nil {
		return "", err
	}
	return strings.Replace(s, old, nw, int(n)), nil
}

func strCase(f func(string) string) methodFunc {
	return func(r *renderer, recv Value, a *callArgs) (Value, error) {
		if len(a.pos) > 0 || len(a.kwNames) > 0 {
			return nil, typeErrorf("takes no arguments")
		}
		s := recvStr(recv)
		if err := r.alloc(int64(len(s))); err != nil {
			return nil, err
		}
		return withKind(recv, f(s)), nil
	}
}

func isCased(r rune) bool { return unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r) }

// pyTitle is str.title: a letter after a cased letter is lowered, any
// other letter title-cased.
func pyTitle(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	prevCased := false
	for _, c := range s {
		if prevCased {
			b.WriteRune(unicode.ToLower(c))
		} else {
			b.WriteRune(unicode.ToTitle(c))
		}
		prevCased = isCased(c)
	}
	return b.String()
}

// pyCapitalize is str.capitalize: the first character title-cased, the
// rest lowered.
func pyCapitalize(s string) string {
	c, size := utf8.DecodeRuneInString(s)
	if size == 0 {
		return s
	}
	return string(unicode.ToTitle(c)) + strings.ToLower(s[size:])
}

func swapCase(s string) string {
	return strings.Map(func(c rune) rune {
		switch {
		case unicode.IsUpper(c):
			return unicode.ToLower(c)
		case unicode.IsLower(c):
			return unicode.ToUpper(c)
		}
		return c
	}, s)
}

// strFind is find/rfind (-1 when absent) and index/rindex (an error).
func strFind(last, raise bool) methodFunc {
	return func(r *renderer, recv Value, a *callArgs) (Value, error) {
		if len(a.pos) < 1 {
			return nil, typeErrorf("find() takes at least 1 argument (0 given)")
		}
		sub, ok := isString(a.pos[0])
		if !ok {
			return nil, typeErrorf("must be str, not %s", typeName(a.pos[0]))
		}
		s := recvStr(recv)
		if err := r.scan(len(s)); err != nil {
			return nil, err
		}
		runes := []rune(s)
		start, end, _, err := sliceIndices(valueAt(a.pos, 1), valueAt(a.pos, 2), nil, len(runes))
		if err != nil {
			return nil, err
		}
		if end < start {
			end = start
		}
		hay := string(runes[start:end])
		var i int
		if last {
			i = strings.LastIndex(hay, sub)
		} else {
			i = strings.Index(hay, sub)
		}
		if i < 0 {
			if raise {
				return nil, errorf(kindValue, "substring not found")
			}
			return int64(-1), nil
		}
		return int64(start + utf8.RuneCountInString(hay[:i])), nil
	}
}

func strCount(r *renderer, recv Value, a *callArgs) (Value, error) {
	if len(a.pos) != 1 {
		return nil, typeErrorf("count() takes exactly one argument")
	}
	sub, ok := isString(a.pos[0])
	if !ok {
		return nil, typeErrorf("must be str, not %s", typeName(a.pos[0]))
	}
	s := recvStr(recv)
	if err := r.scan(len(s)); err != nil {
		return nil, err
	}
	if sub == "" {
		return int64(utf8.RuneCountInString(s) + 1), nil
	}
	return int64(strings.Count(s, sub)), nil
}

func strJoin(r *renderer, recv Value, a *callArgs) (Value, error) {
	if len(a.pos) != 1 {
		return nil, typeErrorf("join() takes exactly one argument")
	}
	items, err := r.iterate(a.pos[0])
	if err != nil {
		return nil, err
	}
	parts := make([]string, len(items))
	for i, it := range items {
		s, ok := isString(it)
		if !ok {
			return nil, typeErrorf("sequence item %d: expected str instance, %s found", i, typeName(it))
		}
		parts[i] = s
	}
	out, err := r.join(parts, recvStr(recv))
	if err != nil {
		return nil, err
	}
	return withKind(recv, out), nil
}

// join joins parts with sep, its size charged first.
func (r *renderer) join(parts []string, sep string) (string, error) {
	n := int64(len(sep)) * int64(max(len(parts)-1, 0))
	for _, p := range parts {
		n += int64(len(p))
	}
	if err := r.alloc(n); err != nil {
		return "", err
	}
	return strings.Join(parts, sep), nil
}

func strFormatMethod(r *renderer, recv Value, a *callArgs) (Value, error) {
	out, err := r.strFormat(recvStr(recv), a)
	if err != nil {
		return nil, err
	}
	return withKind(recv, out), nil
}

// strPad is center/ljust/rjust: the width is checked before the padding
// is made.
func strPad(kind string) methodFunc {
	return func(r *renderer, recv Value, a *callArgs) (Value, error) {
		args, err := a.bind(kind, "width", "fillchar")
		if err != nil {
			return nil, err
		}
		w, _, isInt, ok := number(args[0])
		if !ok || !isInt {
			return nil, typeErrorf("'%s' object cannot be interpreted as an integer", typeName(args[0]))
		}
		fill := " "
		if !isMissing(args[1]) {
			f, ok := isString(args[1])
			if !ok || utf8.RuneCountInString(f) != 1 {
				return nil, typeErrorf("The fill character must be exactly one character long")
			}
			fill = f
		}
		out, err := r.pad(recvStr(recv), w, fill, kind)
		if err != nil {
			return nil, err
		}
		return withKind(recv, out), nil
	}
}

// pad pads s to width characters with fill, as Python's center, ljust
// and rjust do (center puts the odd one on the right, except that
// Python's rounding puts it left when the padding is odd and the width
// is odd too).
func (r *renderer) pad(s string, width int64, fill, kind string) (string, error) {
	n := int64(utf8.RuneCountInString(s))
	if width <= n {
		return s, nil
	}
	padding := width - n
	if padding > int64(r.lim.Output)/int64(len(fill)) {
		return "", r.fail("the template would pad a string to %d characters; at most %d bytes are allowed", width, r.lim.Output)
	}
	if err := r.alloc(int64(len(s)) + padding*int64(len(fill))); err != nil {
		return "", err
	}
	var left int64
	switch kind {
	case "center":
		left = padding / 2
		if padding%2 == 1 && width%2 == 1 {
			left++
		}
	case "rjust":
		left = padding
	}
	return strings.Repeat(fill, int(left)) + s + strings.Repeat(fill, int(padding-left)), nil
}

func strZfill(r *renderer, recv Value, a *callArgs) (Value, error) {
	if len(a.pos) != 1 {
		return nil, typeErrorf("zfill() takes exactly one argument")
	}
	w, _, isInt, ok := number(a.pos[0])
	if !ok || !isInt {
		return nil, typeErrorf("'%s' object cannot be interpreted as an integer", typeName(a.pos[0]))
	}
	s := recvStr(recv)
	sign := ""
	if s != "" && (s[0] == '+' || s[0] == '-') {
		sign, s = s[:1], s[1:]
	}
	out, err := r.pad(s, w-int64(len(sign)), "0", "rjust")
	if err != nil {
		return nil, err
	}
	return withKind(recv, sign+out), nil
}

func strPartition(last bool) methodFunc {
	return func(r *renderer, recv Value, a *callArgs) (Value, error) {
		if len(a.pos) != 1 {
			return nil, typeErrorf("partition() takes exactly one argument")
		}
		sep, ok := isString(a.pos[0])
		if !ok || sep == "" {
			return nil, errorf(kindValue, "empty separator")
		}
		s := recvStr(recv)
		var i int
		if last {
			i = strings.LastIndex(s, sep)
		} else {
			i = strings.Index(s, sep)
		}
		if i < 0 {
			if last {
				return newTuple(withKind(recv, ""), withKind(recv, ""), recv), nil
			}
			return newTuple(recv, withKind(recv, ""), withKind(recv, "")), nil
		}
		return newTuple(withKind(recv, s[:i]), withKind(recv, sep), withKind(recv, s[i+len(sep):])), nil
	}
}

func strRemove(f func(string, string) string) methodFunc {
	return func(r *renderer, recv Value, a *callArgs) (Value, error) {
		if len(a.pos) != 1 {
			return nil, typeErrorf("takes exactly one argument")
		}
		affix, ok := isString(a.pos[0])
		if !ok {
			return nil, typeErrorf("must be str, not %s", typeName(a.pos[0]))
		}
		return withKind(recv, f(recvStr(recv), affix)), nil
	}
}

func strIs(pred func(rune) bool) methodFunc {
	return func(r *renderer, recv Value, a *callArgs) (Value, error) {
		s := recvStr(recv)
		if s == "" {
			return false, nil
		}
		for _, c := range s {
			if !pred(c) {
				return false, nil
			}
		}
		return true, nil
	}
}

func strIsASCII(r *renderer, recv Value, a *callArgs) (Value, error) {
	return isASCII(recvStr(recv)), nil
}

// strCased is isupper/islower: some cased character, none of the other
// case.
func strCased(want, other func(rune) bool) methodFunc {
	return func(r *renderer, recv Value, a *callArgs) (Value, error) {
		found := false
		for _, c := range recvStr(recv) {
			if other(c) || unicode.IsTitle(c) {
				return false, nil
			}
			if want(c) {
				found = true
			}
		}
		return found, nil
	}
}

func dictGet(r *renderer, recv Value, a *callArgs) (Value, error) {
	args, err := a.bind("get", "key", "default")
	if err != nil {
		return nil, err
	}
	if isMissing(args[0]) {
		return nil, typeErrorf("get expected at least 1 argument, got 0")
	}
	if _, err := hashKey(args[0]); err != nil {
		return nil, err
	}
	if v, ok := recv.(*Dict).Get(args[0]); ok {
		return v, nil
	}
	return orDefault(args[1], nil), nil
}

func dictView(kind listKind) methodFunc {
	return func(r *renderer, recv Value, a *callArgs) (Value, error) {
		d := recv.(*Dict)
		per := int64(itemBytes)
		if kind == kindDictItems {
			per += 64
		}
		if err := r.allocItems(int64(d.Len()), per); err != nil {
			return nil, err
		}
		items := make([]Value, d.Len())
		for i, k := range d.keys {
			switch kind {
			case kindDictItems:
				items[i] = newTuple(k, d.vals[i])
			case kindDictKeys:
				items[i] = k
			default:
				items[i] = d.vals[i]
			}
		}
		return &List{Items: items, kind: kind}, nil
	}
}

func dictCopy(r *renderer, recv Value, a *callArgs) (Value, error) {
	d := recv.(*Dict)
	if err := r.allocItems(int64(d.Len()), entryBytes); err != nil {
		return nil, err
	}
	c := NewDict()
	for i, k := range d.keys {
		_ = c.Set(k, d.vals[i])
	}
	return c, nil
}

func listCount(r *renderer, recv Value, a *callArgs) (Value, error) {
	if len(a.pos) != 1 {
		return nil, typeErrorf("count() takes exactly one argument")
	}
	n := int64(0)
	for _, it := range recv.(*List).Items {
		eq, err := r.equal(it, a.pos[0], 0)
		if err != nil {
			return nil, err
		}
		if eq {
			n++
		}
	}
	return n, nil
}

func listIndex(r *renderer, recv Value, a *callArgs) (Value, error) {
	if len(a.pos) < 1 {
		return nil, typeErrorf("index expected at least 1 argument, got 0")
	}
	for i, it := range recv.(*List).Items {
		eq, err := r.equal(it, a.pos[0], 0)
		if err != nil {
			return nil, err
		}
		if eq {
			return int64(i), nil
		}
	}
	return nil, errorf(kindValue, "%s is not in list", scalarRepr(a.pos[0]))
}

func listCopy(r *renderer, recv Value, a *callArgs) (Value, error) {
	l := recv.(*List)
	if err := r.allocItems(int64(len(l.Items)), itemBytes); err != nil {
		return nil, err
	}
	return NewList(append([]Value(nil), l.Items...)), nil
}
