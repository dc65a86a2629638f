package jsonstrict_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/jsonstrict"
	"github.com/lmstream/lmstream/core/status"
)

// The scanner's rules, on their own: the request parser's tests
// (core/loop) cover them again through every field a request has.
func TestParseFieldsRefusesWhatIsNotStrictJSON(t *testing.T) {
	for _, c := range []struct{ in, msg string }{
		{`{"a":1,"a":2}`, `duplicate key "a"`},
		{`{"a":1} x`, "at byte 8"},
		{"{\"a\":\"\xff\"}", "invalid UTF-8 byte 0xff"},
		{`{"a":"\ud800"}`, "lone high surrogate"},
		{`[1]`, "expected a JSON object, got array"},
	} {
		_, err := jsonstrict.ParseFields([]byte(c.in), "doc")
		require.Error(t, err, c.in)
		assert.Equal(t, status.BadJSON, status.CodeOf(err), c.in)
		assert.Contains(t, err.Error(), c.msg, c.in)
	}
}

func TestFieldsTakeChecksTypesRangesAndLeftovers(t *testing.T) {
	f, err := jsonstrict.ParseFields([]byte(`{"n":7,"s":"x","z":null,"left":true}`), "doc")
	require.NoError(t, err)
	var n int
	given, err := jsonstrict.TakeIn(f, "n", &n, 0, 5)
	assert.True(t, given)
	require.Error(t, err)
	assert.Equal(t, status.InvalidRequest, status.CodeOf(err))
	assert.Contains(t, err.Error(), `doc field "n" must be in [0, 5], got 7 (at byte 5)`)

	var s int
	_, err = f.Take("s", &s)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "string")
	var z string
	_, err = f.Take("z", &z)
	require.Error(t, err, "no field takes null")

	given, err = f.Take("absent", &z)
	assert.False(t, given)
	require.NoError(t, err)

	err = f.Rest()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown field "left"`)
}

func TestNullableFieldTakesNullAsZero(t *testing.T) {
	type msg struct {
		Content string `json:"content" jsonstrict:"nullable"`
		Role    string `json:"role"`
	}
	f, err := jsonstrict.ParseFields([]byte(`{"m":{"content":null,"role":"r"},"n":{"content":"x","role":null}}`), "request")
	require.NoError(t, err)
	var m msg
	_, err = f.Take("m", &m)
	require.NoError(t, err)
	require.Equal(t, msg{Role: "r"}, m)
	_, err = f.Take("n", &m)
	require.ErrorContains(t, err, `"n.role" must be a string, got null`)
}
