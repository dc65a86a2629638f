package tokenizer

import (
	"fmt"
)

// Config is what a GGUF file's tokenizer.* metadata holds.
type Config struct {
	Model  string    // tokenizer.ggml.model: "gpt2" (byte-level BPE), "llama" (SentencePiece) or "bert" (WordPiece)
	Pre    string    // tokenizer.ggml.pre: "smollm", "gpt-2", "llama-bpe" (Llama-3), "qwen2", "tekken", ... (PreTokenizerNames); ignored for "llama" and "bert"
	Tokens [][]byte  // tokenizer.ggml.tokens (raw bytes as stored)
	Scores []float32 // tokenizer.ggml.scores (SPM); nil or one per token
	Types  []int32   // tokenizer.ggml.token_type; nil (all normal) or one per token
	Merges []string  // tokenizer.ggml.merges (BPE), "a b" pairs in rank order

	BOS, EOS, UNK, PAD int32 // -1 when absent
	// EOG are further ids that end generation besides EOS
	// (tokenizer.ggml.eot_token_id, eom_token_id).
	EOG []int32

	AddBOS, AddEOS bool
	AddSpacePrefix bool // SPM: tokenizer.ggml.add_space_prefix

	// WordPiece's normaliser (tokenizer.ggml.normalizer.lowercase and
	// .strip_accents): lower-case the text; decompose it and drop the
	// accents (marks).
	Lowercase, StripAccents bool
}

// TokenType is the value of tokenizer.ggml.token_type for one token.
type TokenType int32

// Token types as GGUF stores them.
const (
	TypeUndefined   TokenType = 0
	TypeNormal      TokenType = 1
	TypeUnknown     TokenType = 2
	TypeControl     TokenType = 3
	TypeUserDefined TokenType = 4
	TypeUnused      TokenType = 5
	TypeByte        TokenType = 6
)

// EncodeOptions control Encode.
type EncodeOptions struct {
	// AddSpecial adds BOS and/or EOS as the configuration asks
	// (Config.AddBOS, Config.AddEOS).
	AddSpecial bool
	// ParseSpecial recognises the texts of control tokens, such as
	// "<|im_start|>", inside the input and emits their ids. Without it such
	// text is tokenized as ordinary characters. User-defined tokens are
	// recognised either way.
	ParseSpecial bool
}

type modelKind int

const (
	modelBPE modelKind = iota // "gpt2"
	modelSPM                  // "llama"
	modelWPM                  // "bert"
)

// eogTexts are token texts that end a generation turn in common chat
// formats. A model's EOS may be only one of them (SmolLM2-Instruct's EOS is
// <|im_end|> while <|endoftext|> still ends base-model text), so each one that
// is present counts.
var eogTexts = []string{
	"<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>",
	"<end_of_turn>", "<|end|>", "<EOT>", "</s>", "<|return|>",
}

// Tokenizer encodes and decodes with one vocabulary. Create it with New.
type Tokenizer struct {
	kind   modelKind
	tokens []string // stored (vocabulary-form) text of each token
	types  []TokenType
	scores []float32
	pieces [][]byte // output bytes of each token, sub-slices of one buffer
	textID map[string]int32

	bos, eos, unk, pad int32
	addBOS, addEOS     bool
	addSpacePrefix     bool
	lowercase          bool // WordPiece normaliser
	stripAccents       bool

	special specialMatcher
	eog     map[int32]bool

	// byte-level BPE
	pre         *preTokenizer
	wholeWord   bool // look a whole pre-token up before merging (Llama-3's ignore_merges)
	merges      map[uint64]mergeRule
	byteTok     [256]int32 // id of the token for each single byte, -1 if none
	cache       *wordCache
	spmPieces   map[string]int32 // SPM: texts a merge may produce (normal/user-defined tokens)
	spmByteToks [256]int32       // SPM: id of "<0xNN>", -1 if none
	wpm         *wpmTrie         // WordPiece: every token text, for longest-prefix matching
}

// New validates cfg and builds a Tokenizer. The errors name the offending
// field, index and value, because they surface to users loading a broken or
// unsupported GGUF file.
func New(cfg Config) (*Tokenizer, error) {
	n := len(cfg.Tokens)
	if n == 0 {
		return nil, fmt.Errorf("tokenizer: empty vocabulary (tokenizer.ggml.tokens)")
	}
	if int64(n) > 1<<31-1 {
		return nil, fmt.Errorf("tokenizer: vocabulary of %d tokens does not fit int32 ids", n)
	}
	t := &Tokenizer{
		tokens: make([]string, n),
		types:  make([]TokenType, n),
		scores: make([]float32, n),
		textID: make(map[string]int32, n),
		bos:    cfg.BOS, eos: cfg.EOS, unk: cfg.UNK, pad: cfg.PAD,
		addBOS: cfg.AddBOS, addEOS: cfg.AddEOS,
		addSpacePrefix: cfg.AddSpacePrefix,
		lowercase:      cfg.Lowercase, stripAccents: cfg.StripAccents,
	}
	switch cfg.Model {
	case "gpt2":
		t.kind = modelBPE
	case "llama":
		t.kind = modelSPM
	case "bert":
		t.kind = modelWPM
	default:
		return nil, fmt.Errorf("tokenizer: unsupported tokenizer model %q (want \"gpt2\", \"llama\" or \"bert\")", cfg.Model)
	}

	if cfg.Types != nil && len(cfg.Types) != n {
		return nil, fmt.Errorf("tokenizer: %d token types for %d tokens", len(cfg.Types), n)
	}
	if cfg.Scores != nil && len(cfg.Scores) != n {
		return nil, fmt.Errorf("tokenizer: %d scores for %d tokens", len(cfg.Scores), n)
	}
	if t.kind == modelSPM && cfg.Scores == nil {
		return nil, fmt.Errorf("tokenizer: SentencePiece (\"llama\") model needs tokenizer.ggml.scores")
	}
	for name, id := range map[string]int32{"BOS": cfg.BOS, "EOS": cfg.EOS, "UNK": cfg.UNK, "PAD": cfg.PAD} {
		if id < -1 || id >= int32(n) {
			return nil, fmt.Errorf("tokenizer: %s id %d out of range [0, %d) (use -1 for absent)", name, id, n)
		}
	}
	if cfg.AddBOS && cfg.BOS < 0 {
		return nil, fmt.Errorf("tokenizer: AddBOS set but no BOS token")
	}
	if cfg.AddEOS && cfg.EOS < 0 {
		return nil, fmt.Errorf("tokenizer: AddEOS set but no EOS token")
	}

	total := 0
	for i, tok := range cfg.Tokens {
		s := string(tok)
		t.tokens[i] = s
		total += len(s)
		ty := TypeNormal
		if cfg.Types != nil {
			ty = TokenType(cfg.Types[i])
			if ty < TypeUndefined || ty > TypeByte {
				return nil, fmt.Errorf("tokenizer: token %d (%q) has unknown type %d", i, s, ty)
			}
		}
		t.types[i] = ty
		if cfg.Scores != nil {
			t.scores[i] = cfg.Scores[i]
		}
		// The first occurrence wins when a vocabulary repeats a text, so
		// TokenID and the merge tables agree on one id.
		if _, dup := t.textID[s]; !dup {
			t.textID[s] = int32(i)
		}
	}

	t.buildPieces(total)
	t.special = newSpecialMatcher(t.tokens, t.types)
	t.eog = map[int32]bool{}
	if t.eos >= 0 {
		t.eog[t.eos] = true
	}
	for _, id := range cfg.EOG {
		if id < 0 || id >= int32(n) {
			return nil, fmt.Errorf("tokenizer: end-of-generation id %d out of range [0, %d)", id, n)
		}
		t.eog[id] = true
	}
	for _, s := range eogTexts {
		if id, ok := t.textID[s]; ok {
			t.eog[id] = true
		}
	}

	var err error
	switch t.kind {
	case modelBPE:
		err = t.initBPE(cfg)
	case modelSPM:
		t.initSPM()
	case modelWPM:
		err = t.initWPM()
	}
	if err != nil {
		return nil, err
	}
	return t, nil
}

// buildPieces precomputes every token's output bytes so that Piece, which the
// streaming layer calls once per generated token, is a slice lookup.
func (t *Tokenizer) buildPieces(sizeHint int) {
	buf := make([]byte, 0, sizeHint)
	starts := make([]int, len(t.tokens)+1)
	for i, s := range t.tokens {
		starts[i] = len(buf)
		buf = t.appendPieceOf(buf, int32(i), s)
	}
	starts[len(t.tokens)] = len(buf)
	t.pieces = make([][]byte, len(t.tokens))
	for i := range t.tokens {
		// Full slice expression: an append by a caller must not spill into
		// the next token's bytes.
		t.pieces[i] = buf[starts[i]:starts[i+1]:starts[i+1]]
	}
}

func (t *Tokenizer) appendPieceOf(dst []byte, id int32, s string) []byte {
	switch t.types[id] {
	case TypeControl, TypeUserDefined, TypeUnknown:
		// Stored verbatim: "<|im_end|>", "<unk>", user additions.
		return append(dst, s...)
	}
	if t.kind == modelWPM {
		// "▁" marks a word start (see wordpiece.go): it reads as the space
		// before the word, as llama.cpp's detokenizer has it.
		return append(dst, spmUnescape(s)...)
	}
	if t.kind == modelSPM {
		if t.types[id] == TypeByte {
			if b, ok := parseByteToken(s); ok {
				return append(dst, b)
			}
		}
		return append(dst, spmUnescape(s)...)
	}
	return appendByteLevelDecoded(dst, s)
}

// parseByteToken parses SentencePiece's "<0xNN>" byte-token text.
func parseByteToken(s string) (byte, bool) {
	if len(s) != 6 || s[:3] != "<0x" || s[5] != '>' {
		return 0, false
	}
	hi, ok1 := hexVal(s[3])
	lo, ok2 := hexVal(s[4])
	return hi<<4 | lo, ok1 && ok2
}

func hexVal(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// Encode tokenizes text. It never fails: bytes that no token covers become
// byte tokens, or UNK when the vocabulary has no byte tokens, or are dropped
// when it has neither.
func (t *Tokenizer) Encode(text string, opts EncodeOptions) []int32 {
	out := make([]int32, 0, len(text)/4+4)
	if opts.AddSpecial && t.addBOS {
		out = append(out, t.bos)
	}
	// SentencePiece's space prefix goes at the start of the text and after
	// each special token, since each raw fragment is a fresh "sentence".
	prevSpecial := true
	rest := text
	for len(rest) > 0 {
		start, end, id := t.special.find(rest, opts.ParseSpecial)
		if start < 0 {
			out = t.encodeRaw(out, rest, prevSpecial)
			break
		}
		if start > 0 {
			out = t.encodeRaw(out, rest[:start], prevSpecial)
		}
		out = append(out, id)
		prevSpecial = true
		rest = rest[end:]
	}
	if opts.AddSpecial && t.addEOS {
		out = append(out, t.eos)
	}
	return out
}

func (t *Tokenizer) encodeRaw(out []int32, s string, prevSpecial bool) []int32 {
	switch t.kind {
	case modelSPM:
		return t.encodeSPM(out, s, prevSpecial && t.addSpacePrefix)
	case modelWPM:
		return t.encodeWPM(out, s)
	}
	return t.encodeBPE(out, s)
}

// Decode concatenates the pieces of ids; with skipSpecial it leaves out the
// tokens IsSpecial reports. Ids outside the vocabulary contribute nothing.
func (t *Tokenizer) Decode(ids []int32, skipSpecial bool) []byte {
	n := 0
	for _, id := range ids {
		if t.valid(id) {
			n += len(t.pieces[id])
		}
	}
	out := make([]byte, 0, n)
	for _, id := range ids {
		if !t.valid(id) || (skipSpecial && t.IsSpecial(id)) {
			continue
		}
		out = append(out, t.pieces[id]...)
	}
	return out
}

// Piece returns the raw bytes id contributes to the output stream, possibly
// part of a UTF-8 sequence; nil for an id outside the vocabulary. The slice is
// shared with the Tokenizer and must not be modified (appending is safe): the
// streaming layer calls Piece once per generated token and should not pay an
// allocation for it. Use AppendPiece for a private copy.
func (t *Tokenizer) Piece(id int32) []byte {
	if !t.valid(id) {
		return nil
	}
	return t.pieces[id]
}

// AppendPiece appends Piece(id) to dst.
func (t *Tokenizer) AppendPiece(dst []byte, id int32) []byte {
	if !t.valid(id) {
		return dst
	}
	return append(dst, t.pieces[id]...)
}

// IsSpecial reports whether id is a control or unknown token, or the
// configured BOS or EOS: the tokens Decode(ids, true) leaves out. User-defined
// tokens are not special (see the package documentation).
func (t *Tokenizer) IsSpecial(id int32) bool {
	if !t.valid(id) {
		return false
	}
	if id == t.bos || id == t.eos {
		return true
	}
	ty := t.types[id]
	return ty == TypeControl || ty == TypeUnknown
}

// EOG reports whether id ends generation: EOS, and any of <|endoftext|>,
// <|im_end|>, <|eot_id|>, <|eom_id|>, <|end_of_text|>, <end_of_turn>,
// <|end|>, <EOT>, </s>, <|return|> that the vocabulary has.
func (t *Tokenizer) EOG(id int32) bool { return t.eog[id] }

// Size is the number of tokens in the vocabulary.
func (t *Tokenizer) Size() int { return len(t.tokens) }

// BOS is the beginning-of-sequence id, -1 when absent.
func (t *Tokenizer) BOS() int32 { return t.bos }

// EOS is the end-of-sequence id, -1 when absent.
func (t *Tokenizer) EOS() int32 { return t.eos }

// TokenID looks a token up by its stored vocabulary text: "<|im_end|>", or
// for byte-level BPE the mapped form such as "Ġthe" (" the"), for
// SentencePiece "▁the".
func (t *Tokenizer) TokenID(text string) (int32, bool) {
	id, ok := t.textID[text]
	return id, ok
}

// Text is the stored vocabulary text of id ("" when out of range).
func (t *Tokenizer) Text(id int32) string {
	if !t.valid(id) {
		return ""
	}
	return t.tokens[id]
}

// Type is the token type of id (TypeUndefined when out of range).
func (t *Tokenizer) Type(id int32) TokenType {
	if !t.valid(id) {
		return TypeUndefined
	}
	return t.types[id]
}

func (t *Tokenizer) valid(id int32) bool { return id >= 0 && int(id) < len(t.tokens) }
