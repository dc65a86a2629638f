package tokenizer_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lmstream/lmstream/core/tokenizer"
)

// englishText is size bytes of pseudo-English: words drawn with a skewed
// (Zipf-like) distribution from a few hundred, so repetition resembles prose,
// plus numbers, punctuation and paragraph breaks.
func englishText(size int) string {
	words := strings.Fields(`the of and to a in is it you that he was for on are with as I his they be at one have
this from or had by hot word but what some we can out other were all there when up use your how said an each she
which do their time if will way about many then them write would like so these her long make thing see him two has
look more day could go come did number sound no most people my over know water than call first who may down side been
now find any new work part take get place made live where after back little only round man year came show every good me
give our under name very through just form sentence great think say help low line differ turn cause much mean before move
right boy old too same tell does set three want air well also play small end put home read hand port large spell add even
land here must big high such follow act why ask men change went light kind off need house picture try us again animal
point mother world near build self earth father head stand own page should country found answer school grow study still
learn plant cover food sun four between state keep eye never last let thought city tree cross farm hard start might story
saw far sea draw left late run don't while press close night real life few north open seem together next white children
begin got walk example ease paper group always music those both mark often letter until mile river car feet care second
book carry took science eat room friend began idea fish mountain stop once base hear horse cut sure watch color face wood
main enough plain girl usual young ready above ever red list though feel talk bird soon body dog family direct pose leave
song measure door product black short numeral class wind question happen complete ship area half rock order fire south
problem piece told knew pass since top whole king space heard best hour better true during hundred five remember step
early hold west ground interest reach fast verb sing listen six table travel less morning ten simple several vowel toward
war lay against pattern slow center love person money serve appear road map rain rule govern pull cold notice voice unit
power town fine certain fly fall lead cry dark machine note wait plan figure star box noun field rest correct able pound
done beauty drive stood contain front teach week final gave green oh quick develop ocean warm free minute strong special
mind behind clear tail produce fact street inch multiply nothing course stay wheel full force blue object decide surface
deep moon island foot system busy test record boat common gold possible plane stead dry wonder laugh thousand ago ran
check game shape equate miss brought heat snow tire bring yes distant fill east paint language among grand ball yet wave`)
	rng := rand.New(rand.NewPCG(42, 1))
	zipf := rand.NewZipf(rand.New(rand.NewPCG(7, 7)), 1.1, 2, uint64(len(words)-1))
	var b strings.Builder
	sentence := 0
	for b.Len() < size {
		w := words[zipf.Uint64()]
		if sentence == 0 {
			w = strings.ToUpper(w[:1]) + w[1:]
		} else {
			b.WriteByte(' ')
		}
		b.WriteString(w)
		sentence++
		switch r := rng.IntN(100); {
		case r < 3:
			fmt.Fprintf(&b, " %d", rng.IntN(100000))
		case r < 8:
			b.WriteByte(',')
		case r < 15 && sentence > 4:
			b.WriteString(".")
			if rng.IntN(6) == 0 {
				b.WriteString("\n\n")
			} else {
				b.WriteByte(' ')
			}
			sentence = 0
		}
	}
	return b.String()[:size]
}

// mixedText is size bytes of the multilingual parity corpus's lines in
// random order: eleven scripts, emoji, code, numbers and whitespace runs.
func mixedText(tb testing.TB, size int) string {
	data, err := os.ReadFile(filepath.Join("..", "..", "tests", "tokenizer", "corpus.txt"))
	if err != nil {
		tb.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	rng := rand.New(rand.NewPCG(3, 4))
	var b strings.Builder
	for b.Len() < size {
		b.WriteString(lines[rng.IntN(len(lines))])
		b.WriteByte('\n')
	}
	return strings.ToValidUTF8(b.String()[:size], "")
}

func BenchmarkEncode(b *testing.B) {
	tok := loadSmolLM(b)
	for _, kind := range []string{"english", "mixed"} {
		for _, size := range []int{10 << 10, 100 << 10} {
			var text string
			if kind == "english" {
				text = englishText(size)
			} else {
				text = mixedText(b, size)
			}
			for _, cache := range []string{"warm", "cold"} {
				b.Run(fmt.Sprintf("%s/%dKB/%s", kind, size>>10, cache), func(b *testing.B) {
					b.SetBytes(int64(len(text)))
					tok.Encode(text, plain) // warm the cache
					b.ReportAllocs()
					for b.Loop() {
						if cache == "cold" {
							b.StopTimer()
							tokenizer.ResetCache(tok)
							b.StartTimer()
						}
						tok.Encode(text, plain)
					}
				})
			}
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	tok := loadSmolLM(b)
	ids := tok.Encode(englishText(100<<10), plain)
	b.SetBytes(100 << 10)
	for b.Loop() {
		tok.Decode(ids, false)
	}
}

// BenchmarkPreTokenizeRuns splits long runs of one kind of character with
// the pre-tokenizers whose scanners look furthest ahead: ns/byte should not
// grow with the size (a scanner that rescans a run at every position
// would make it grow linearly).
func BenchmarkPreTokenizeRuns(b *testing.B) {
	for _, c := range []struct{ pre, unit string }{
		{"jais-2", " "}, {"gpt-4o", "AAAé"}, {"tekken", "ABC"}, {"exaone-moe", "a "},
		{"deepseek-llm", " \n"}, {"chameleon", "<sentinel:1"}, {"tiny_aya", "1"},
	} {
		for _, size := range []int{64 << 10, 1 << 20} {
			text := strings.Repeat(c.unit, size/len(c.unit))
			b.Run(fmt.Sprintf("%s/%dKB", c.pre, size>>10), func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				for b.Loop() {
					if _, err := tokenizer.PreTokenize(c.pre, text); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
