package cuda

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/cuda/cu"
	"github.com/lmstream/lmstream/core/cuda/kernels"
)

// cStruct reads struct name's fields from kernels.cu as a string of type
// letters, one per scalar: p (u64), i (int), f (float); arrays repeat
// their letter. #define'd array sizes are resolved.
func cStruct(t *testing.T, name string) string {
	src := string(kernels.Source)
	defines := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^#define (\w+) (\d+)`).FindAllStringSubmatch(src, -1) {
		defines[m[1]], _ = strconv.Atoi(m[2])
	}
	m := regexp.MustCompile(`(?s)struct ` + name + ` \{(.*?)\n\};`).FindStringSubmatch(src)
	require.NotNil(t, m, "kernels.cu has no struct %s", name)
	body := regexp.MustCompile(`//[^\n]*`).ReplaceAllString(m[1], "")
	var out strings.Builder
	for _, stmt := range strings.Split(body, ";") {
		stmt = strings.TrimSpace(stmt)
		if stmt == "" {
			continue
		}
		typ, decls, _ := strings.Cut(stmt, " ")
		letter := map[string]string{"u64": "p", "int": "i", "float": "f"}[typ]
		require.NotEmpty(t, letter, "struct %s: field type %q", name, typ)
		for _, d := range strings.Split(decls, ",") {
			n := 1
			if _, dim, ok := strings.Cut(d, "["); ok {
				dim = strings.TrimSuffix(strings.TrimSpace(dim), "]")
				if v, ok := defines[dim]; ok {
					n = v
				} else {
					n, _ = strconv.Atoi(dim)
				}
			}
			out.WriteString(strings.Repeat(letter, n))
		}
	}
	return out.String()
}

func goStruct(a kernelArgs) string {
	var out strings.Builder
	for _, f := range a.fields() {
		switch v := f.(type) {
		case cu.DevicePtr:
			out.WriteString("p")
		case int32:
			out.WriteString("i")
		case float32:
			out.WriteString("f")
		case [kernels.CommitMoves]int32:
			out.WriteString(strings.Repeat("i", len(v)))
		}
	}
	return out.String()
}

// TestArgsMatchKernelStructs: every Go argument struct has its C struct's
// fields, in order and of the same types, so the packed bytes are the C
// layout (the GPU run checks sizes again, with cuFuncGetParamInfo).
func TestArgsMatchKernelStructs(t *testing.T) {
	for name, a := range map[string]kernelArgs{
		"EmbedArgs": &embedArgs{}, "NormArgs": &normArgs{}, "QuantArgs": &quantArgs{}, "MatVecArgs": &matVecArgs{},
		"RopeArgs": &ropeArgs{}, "AttnArgs": &attnArgs{}, "CommitArgs": &commitArgs{},
	} {
		require.Equal(t, cStruct(t, name), goStruct(a), name)
		var w cu.ArgWriter
		require.Zero(t, len(pack(&w, a))%8, "%s: packed size", name)
	}
	require.Equal(t, "ppiiiiiiii", cStruct(t, "Tok"), "Tok, as writePass fills it")
	require.Equal(t, kernels.TokBytes, 2*8+8*4)
	require.Equal(t, "ii", cStruct(t, "Pass"))
}
