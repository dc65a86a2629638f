package loop

import (
	"github.com/lmstream/lmstream/core/jsonstrict"
	"github.com/lmstream/lmstream/core/sample"
)

// takeSampling reads every sampling field of a request into
// sample.Params: each is parsed, defaulted and checked against its range
// here, the one place a request's sampling fields are read (the ranges
// are sample's constants; an error names the field and its offset), and
// the result is made canonical (sample.Params.Canonical), so that every
// backend decodes with the values the request carries. A positive
// temperature below sample.MinTemperature decodes greedily, as documented.
func takeSampling(f *jsonstrict.Fields) (sample.Params, error) {
	p := sample.Params{TopP: 1, RepetitionPenalty: 1, RepeatLastN: sample.DefaultRepeatLastN}
	if _, err := jsonstrict.TakeIn(f, "temperature", &p.Temperature, 0, sample.MaxTemperature); err != nil {
		return p, err
	}
	if _, err := f.Take("top_p", &p.TopP); err != nil {
		return p, err
	}
	if !(p.TopP > 0 && p.TopP <= 1) {
		return p, f.Errorf("top_p", "must be in (0, 1], got %g", p.TopP)
	}
	if _, err := jsonstrict.TakeIn(f, "min_p", &p.MinP, 0, 1); err != nil {
		return p, err
	}
	if _, err := jsonstrict.TakeIn(f, "top_k", &p.TopK, 0, MaxTopK); err != nil {
		return p, err
	}
	var err error
	if p.HasSeed, err = f.Take("seed", &p.Seed); err != nil {
		return p, err
	}
	// The penalty window's memory grows with the tokens generated, never
	// with repeat_last_n itself.
	for _, pen := range []struct {
		key    string
		dst    *float64
		lo, hi float64
	}{
		{"repetition_penalty", &p.RepetitionPenalty, 0, sample.MaxRepetitionPenalty},
		{"presence_penalty", &p.PresencePenalty, -sample.MaxAdditivePenalty, sample.MaxAdditivePenalty},
		{"frequency_penalty", &p.FrequencyPenalty, -sample.MaxAdditivePenalty, sample.MaxAdditivePenalty},
	} {
		if _, err := jsonstrict.TakeIn(f, pen.key, pen.dst, pen.lo, pen.hi); err != nil {
			return p, err
		}
	}
	if r := p.RepetitionPenalty; r != 0 && r < sample.MinRepetitionPenalty {
		return p, f.Errorf("repetition_penalty", "must be 0 or 1 (off) or in [%g, %g], got %g", sample.MinRepetitionPenalty, float64(sample.MaxRepetitionPenalty), r)
	}
	if _, err := jsonstrict.TakeIn(f, "repeat_last_n", &p.RepeatLastN, 0, sample.MaxRepeatLastN); err != nil {
		return p, err
	}
	return p.Canonical(), nil
}
