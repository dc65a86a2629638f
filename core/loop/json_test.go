package loop_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/jsonstrict"
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/status"
)

// goTypeWords are fragments of Go type names that must never reach a
// message: callers write JSON, not Go.
var goTypeWords = []string{"*string", "[]string", "loop.", "jsonstrict.", "int32", "int64", "uint64", "float64", "[]int", "struct", "json:", "Go value"}

func requireCode(t *testing.T, err error, want status.Code, wantMsg, input string) {
	t.Helper()
	require.Error(t, err, input)
	assert.Equal(t, want, status.CodeOf(err), "%s: %v", input, err)
	assert.Contains(t, err.Error(), wantMsg, input)
	for _, w := range goTypeWords {
		assert.NotContains(t, err.Error(), w, input)
	}
}

// Issue 10, row 6: lenient JSON was accepted. Each of these is now
// BadJSON with the byte offset of the problem.
func TestStrictJSONSyntax(t *testing.T) {
	deep := strings.Repeat("[", 100) + strings.Repeat("]", 100)
	for _, c := range []struct{ in, msg string }{
		{`{"prompt":"x"}}`, "unexpected data after the top-level value"},
		{`{"prompt":"x"}}`, "at byte 14"},
		{`{"prompt":"x"} x`, "at byte 15"},
		{`{"prompt":"x"}{"prompt":"y"}`, "unexpected data"},
		{`{"prompt":"x"}]`, "unexpected data"},
		{`{"prompt":"x","prompt":"y"}`, `duplicate key "prompt"`},
		{`{"prompt":"x","prompt":"y"}`, "at byte 14"},
		{`{"prompt":"x","pr\u006fmpt":"y"}`, `duplicate key "prompt"`},
		{`{"messages":[{"role":"user","role":"system","content":"x"}]}`, `duplicate key "role"`},
		{`{"prompt":"x","script":[],"extra":{"a":1,"a":2}}`, `duplicate key "a"`},
		{"{\"prompt\":\"\xff\"}", "invalid UTF-8 byte 0xff"},
		{"{\"prompt\":\"\xff\"}", "at byte 11"},
		{"{\"prompt\":\"a\xc0\xafb\"}", "invalid UTF-8 byte 0xc0"},
		{"{\"prompt\":\"\xed\xa0\x80\"}", "invalid UTF-8 byte 0xed"},
		{"{\"prompt\":\"\xe2\x82\"}", "invalid UTF-8 byte 0xe2"},
		{"{\"pr\xffompt\":\"x\"}", "invalid UTF-8"},
		{`{"prompt":"\ud800"}`, `lone high surrogate \ud800`},
		{`{"prompt":"\ud800"}`, "at byte 11"},
		{`{"prompt":"\udc00x"}`, `lone low surrogate \udc00`},
		{`{"prompt":"\ud800\u0041"}`, "lone high surrogate"},
		{`{"prompt":"\ud800\ud800"}`, "lone high surrogate"},
		{`{"prompt":"\u12"}`, `invalid \u escape`},
		{`{"prompt":"\x"}`, `invalid escape`},
		{"{\"prompt\":\"a\nb\"}", "control character 0x0a"},
		{`{"prompt":"x","a":` + deep + `}`, "nested deeper than 64 levels"},
		{`{"prompt":"x","a":01}`, "leading zero"},
		{`{"prompt":"x","a":1.}`, "digits expected after '.'"},
		{`{"prompt":"x","a":.5}`, "unexpected character"},
		{`{"prompt":"x","a":-}`, "invalid number"},
		{`{"prompt":"x","a":1e}`, "exponent"},
		{`{"prompt":"x","a":+1}`, "unexpected character"},
		{`{"prompt":"x","a":NaN}`, "unexpected character"},
		{`{"prompt":"x","a":Infinity}`, "unexpected character"},
		{`{"prompt":"x","a":nul}`, "invalid literal"},
		{`{"prompt":"x","a":True}`, "unexpected character"},
		{`{"prompt":"x",}`, "object key expected"},
		{`{"prompt":"x" "a":1}`, "',' or '}' expected"},
		{`{"prompt" "x"}`, "':' expected"},
		{`{"prompts":["a" "b"]}`, "',' or ']' expected"},
		{`{"prompts":["a",]}`, "unexpected character"},
		{`{"prompt":"x`, "unterminated string"},
		{`{"prompt":`, "unexpected end of input"},
		{``, "empty JSON"},
		{"  \n\t", "empty JSON"},
		{`[1]`, "expected a JSON object, got array"},
		{`"x"`, "expected a JSON object, got string"},
		{`null`, "expected a JSON object, got null"},
		{`{'prompt':'x'}`, "object key expected"},
	} {
		_, err := loop.ParseRequest([]byte(c.in))
		requireCode(t, err, status.BadJSON, c.msg, c.in)
	}
}

func TestStrictJSONAcceptsWhatIsValid(t *testing.T) {
	r, err := loop.ParseRequest([]byte(" \n{\"prompt\" : \"a\\ud83d\\ude00\\u00e9\\n\\\"\\/\\\\é😀\", \"max_tokens\" : 1e3 , \"seed\":18446744073709551615,\"top_k\":4.0}\r\n"))
	require.NoError(t, err)
	assert.Equal(t, []string{"a😀é\n\"/\\é😀"}, r.Prompts)
	assert.Equal(t, 1000, r.MaxTokens)
	assert.Equal(t, uint64(18446744073709551615), r.Sampling.Seed)
	assert.Equal(t, 4, r.Sampling.TopK)
	// An object of many keys (the duplicate check switches to a map)
	// still accepts distinct keys and catches a late duplicate.
	var b strings.Builder
	b.WriteString(`{"prompt":"x","script":[],"extra":{`)
	for i := range 40 {
		fmt.Fprintf(&b, `"k%d":%d,`, i, i)
	}
	ok := b.String() + `"last":null}}`
	_, err = jsonstrict.ParseFields([]byte(ok), "request")
	require.NoError(t, err)
	_, err = jsonstrict.ParseFields([]byte(b.String()+`"k17":1}}`), "request")
	requireCode(t, err, status.BadJSON, `duplicate key "k17"`, "40 keys")
}

// Wrong types and values are InvalidRequest errors that name the field,
// its byte offset and JSON types. null is never "absent": the header
// promises that wrong types are never ignored, and "seed": null silently
// meaning seed 0 was exactly that.
func TestStrictJSONValues(t *testing.T) {
	many := func(n int, item string) string {
		return "[" + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + "]"
	}
	for _, c := range []struct{ in, msg string }{
		{`{"prompt":"x","seed":null}`, `"seed" must be an integer, got null (at byte 21)`},
		{`{"prompt":null}`, `"prompt" must be a string, got null (at byte 10)`},
		{`{"prompt":"x","max_tokens":null}`, `"max_tokens" must be an integer, got null`},
		{`{"prompt":"x","temperature":null}`, `"temperature" must be a number, got null`},
		{`{"prompt":"x","include_stop":null}`, `"include_stop" must be a boolean, got null`},
		{`{"prompt":"x","stop":null}`, `"stop" must be a string or an array of strings, got null`},
		{`{"prompt":"x","stop_token_ids":null}`, `"stop_token_ids" must be an array of integers, got null`},
		{`{"prompts":null}`, `"prompts" must be an array of strings, got null`},
		{`{"prompts":["a",null]}`, `"prompts[1]" must be a string, got null (at byte 16)`},
		{`{"prompts":["a",7]}`, `"prompts[1]" must be a string, got number 7`},
		{`{"messages":null}`, `"messages" must be an array of objects, got null`},
		{`{"messages":[{"role":"user","content":7}]}`, `"messages[0].content" must be a string, got number`},
		{`{"messages":[{"role":"user","content":"x","tool_calls":null}]}`, `"messages[0].tool_calls" must be an array of objects, got null`},
		{`{"messages":[{"role":null,"content":"x"}]}`, `"messages[0].role" must be a string, got null`},
		{`{"messages":[{"role":"user","content":"x","nick":"y"}]}`, `"messages[0]" has an unknown field "nick" (at byte 42)`},
		{`{"messages":["hi"]}`, `"messages[0]" must be an object, got string "hi"`},
		{`{"messages":[{"content":"x"}]}`, `messages[0] has no "role"`},
		{`{"prompt":"x","max_tokens":0}`, `"max_tokens" must be in [1, 2147483647], got 0 (at byte 27)`},
		{`{"prompt":"x","max_tokens":-5}`, `"max_tokens" must be in [1, 2147483647], got -5`},
		{`{"prompt":"x","max_tokens":1e10}`, `"max_tokens" must be in [1, 2147483647]`},
		{`{"prompt":"x","max_tokens":1.5}`, `"max_tokens" must be an integer, got number 1.5`},
		{`{"prompt":"x","max_tokens":"3"}`, `"max_tokens" must be an integer, got string "3"`},
		{`{"prompt":"x","max_tokens":1e999}`, `"max_tokens" must be an integer in [`},
		{`{"prompt":"x","max_tokens":99999999999999999999999}`, `"max_tokens" must be an integer in [`},
		{`{"prompt":"x","temperature":1e999}`, `"temperature" must be a finite number, got number 1e999 (out of range)`},
		{`{"prompt":"x","temperature":-1e999}`, `"temperature" must be a finite number`},
		{`{"prompt":"x","temperature":-0.5}`, `"temperature" must be in [0, 100], got -0.5`},
		{`{"prompt":"x","temperature":1000}`, `"temperature" must be in [0, 100], got 1000`},
		{`{"prompt":"x","temperature":true}`, `"temperature" must be a number, got boolean true`},
		{`{"prompt":"x","temperature":[1]}`, `"temperature" must be a number, got array`},
		{`{"prompt":"x","top_p":0}`, `"top_p" must be in (0, 1], got 0`},
		{`{"prompt":"x","top_p":1.5}`, `"top_p" must be in (0, 1]`},
		{`{"prompt":"x","min_p":-1e-300}`, `"min_p" must be in [0, 1]`},
		{`{"prompt":"x","top_k":-1}`, `"top_k" must be in [0, 2147483647], got -1`},
		{`{"prompt":"x","top_k":1e30}`, `"top_k" must be an integer in [`},
		{`{"prompt":"x","top_k":{}}`, `"top_k" must be an integer, got object`},
		{`{"prompt":"x","seed":-1}`, `"seed" must be an integer in [0, 18446744073709551615], got -1`},
		{`{"prompt":"x","seed":18446744073709551616}`, `"seed" must be an integer in [0, 18446744073709551615]`},
		{`{"prompt":"x","seed":0.5}`, `"seed" must be an integer, got number 0.5`},
		{`{"prompt":"x","tpot_slo_ms":1e300}`, `"tpot_slo_ms" must be in [0, 3.6e+06], got 1e+300`},
		{`{"prompt":"x","ttft_slo_ms":-1}`, `"ttft_slo_ms" must be in [0, 3.6e+06]`},
		{`{"prompt":"x","stop":5}`, `"stop" must be a string or an array of strings, got number`},
		{`{"prompt":"x","stop":["a",null]}`, `"stop[1]" must be a string, got null`},
		{`{"prompt":"x","stop":` + many(65, `"s"`) + `}`, `"stop" holds 65 strings; at most 64 are allowed`},
		{`{"prompt":"x","stop":"` + strings.Repeat("y", 4097) + `"}`, `"stop" holds 4097 bytes of stop strings; at most 4096`},
		{`{"prompt":"x","stop_token_ids":` + many(1025, "1") + `}`, `"stop_token_ids" holds 1025 ids; at most 1024`},
		{`{"prompt":"x","stop_token_ids":[2147483648]}`, `"stop_token_ids[0]" must be an integer in [-2147483648, 2147483647], got 2147483648`},
		{`{"prompts":` + many(4097, `"p"`) + `}`, `"prompts" holds 4097 prompts; at most 4096`},
		{`{"prompts":[]}`, `"prompts" must hold at least one prompt`},
		{`{"messages":[]}`, `"messages" must hold at least one message`},
	} {
		_, err := loop.ParseRequest([]byte(c.in))
		requireCode(t, err, status.InvalidRequest, c.msg, c.in)
	}
}

// Issue 10, row 1: a subnormal temperature is accepted and documented as
// greedy; the request carries temperature 0 to every backend.
func TestTinyTemperatureRequestIsGreedy(t *testing.T) {
	for _, temp := range []string{"1e-320", "1e-310", "2e-308", "1e-400", "-0.0", "9e-6"} {
		r, err := loop.ParseRequest([]byte(`{"prompt":"x","temperature":` + temp + `}`))
		require.NoError(t, err, temp)
		assert.Zero(t, r.Sampling.Temperature, temp)
	}
	r, err := loop.ParseRequest([]byte(`{"prompt":"x","temperature":1e-5}`))
	require.NoError(t, err)
	assert.Equal(t, 1e-5, r.Sampling.Temperature)
}

// The same strictness holds for the runtime config and for the fields a
// backend takes (replay's here).
func TestStrictJSONConfig(t *testing.T) {
	for _, c := range []struct {
		in   string
		code status.Code
		msg  string
	}{
		{`{"backend":"replay","backend":"cpu"}`, status.BadJSON, `duplicate key "backend"`},
		{`{"backend":"replay","vocab":["00"],"eos_id":0}]`, status.BadJSON, "unexpected data"},
		{"{\"backend\":\"replay\",\"vocab\":[\"\xfe\"],\"eos_id\":0}", status.BadJSON, "invalid UTF-8"},
		{`{"max_slots":null}`, status.InvalidRequest, `config field "max_slots" must be an integer, got null`},
		{`{"backend":null}`, status.InvalidRequest, `config field "backend" must be a string, got null`},
		{`{"backend":"replay","vocab":["00"],"eos_id":null}`, status.InvalidRequest, `config field "eos_id" must be an integer, got null`},
		{`{"backend":"replay","vocab":["00",null],"eos_id":0}`, status.InvalidRequest, `config field "vocab[1]" must be a string, got null`},
		{`{"backend":"replay","vocab":["00"],"eos_id":0,"special_ids":[1e99]}`, status.InvalidRequest, `config field "special_ids[0]" must be an integer in [`},
	} {
		_, err := loop.New([]byte(c.in))
		requireCode(t, err, c.code, c.msg, c.in)
	}
}

func TestStrictJSONBackendFields(t *testing.T) {
	rt := byteRuntime(t, 1, "")
	for _, c := range []struct{ in, msg string }{
		{`{"prompt":"x","script":null}`, `"script" must be an array of arrays of integers, got null`},
		{`{"prompt":"x","script":[[1,null]]}`, `"script[0][1]" must be an integer, got null`},
		{`{"prompt":"x","script":[[1]],"delay_ms":null}`, `"delay_ms" must be a number, got null`},
		{`{"prompt":"x","script":[[1]],"delay_ms":1e999}`, `"delay_ms" must be a finite number`},
		{`{"prompt":"x","script":[[1]],"nope":1,"nada":2}`, `unknown fields "nope" (at byte 29), "nada" (at byte 38)`},
	} {
		err := rt.Submit([]byte(c.in), nil)
		requireCode(t, err, status.InvalidRequest, c.msg, c.in)
	}
}
