package reply

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// detectWant is what Detect must say of each real template in the chat
// corpus: a change that misclassifies one fails here.
var detectWant = map[string]struct {
	f      Format
	thinks bool
}{
	"Apertus-8B-Instruct.jinja":                           {None, false},
	"Apriel-1.6-15b-Thinker-fixed.jinja":                  {None, false},
	"Bielik-11B-v3.0-Instruct.jinja":                      {Hermes, true},
	"ByteDance-Seed-OSS.jinja":                            {SeedOSS, true},
	"Cohere2MoE.jinja":                                    {None, false},
	"CohereForAI-c4ai-command-r-plus-tool_use.jinja":      {None, false},
	"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja": {None, false},
	"GLM-4.6.jinja":                                       {None, true},
	"GLM-4.7-Flash.jinja":                                 {None, true},
	"GigaChat3-10B-A1.8B.jinja":                           {None, false},
	"GigaChat3.1-10B-A1.8B.jinja":                         {None, false},
	"HuggingFaceTB-SmolLM3-3B.jinja":                      {None, true},
	"Kimi-K2-Instruct.jinja":                              {None, false},
	"Kimi-K2-Thinking.jinja":                              {None, true},
	"Kimi-K3.jinja":                                       {None, false},
	"LFM2-8B-A1B.jinja":                                   {None, false},
	"LFM2.5-8B-A1B.jinja":                                 {None, true},
	"LFM2.5-Instruct.jinja":                               {None, true},
	"MiMo-VL.jinja":                                       {Hermes, false},
	"MiniMax-M1.jinja":                                    {None, false},
	"MiniMax-M2.jinja":                                    {None, true},
	"MiniMax-M3.jinja":                                    {None, true},
	"Mistral-Small-3.2-24B-Instruct-2506.jinja":           {Mistral, false},
	"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja":           {Qwen3Coder, true},
	"NVIDIA-Nemotron-Nano-v2.jinja":                       {None, true},
	"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja": {Hermes, false},
	"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja":   {Hermes, false},
	"Qwen-QwQ-32B.jinja":                                  {Hermes, true},
	"Qwen-Qwen2.5-7B-Instruct.jinja":                      {Hermes, false},
	"Qwen-Qwen3-0.6B.jinja":                               {Hermes, true},
	"Qwen3-Coder.jinja":                                   {Qwen3Coder, false},
	"Qwen3.5-4B.jinja":                                    {Qwen3Coder, true},
	"Reka-Edge.jinja":                                     {Hermes, true},
	"StepFun3.5-Flash.jinja":                              {Qwen3Coder, true},
	"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja":      {DeepSeek, true},
	"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja":      {DeepSeek, true},
	"deepseek-ai-DeepSeek-V3.1.jinja":                     {DeepSeek, true},
	"deepseek-ai-DeepSeek-V3.2.jinja":                     {None, true},
	"deepseek-ai-DeepSeek-V4-Flash-0731.jinja":            {None, true},
	"deepseek-ai-DeepSeek-V4.jinja":                       {None, true},
	"fireworks-ai-llama-3-firefunction-v2.jinja":          {None, false},
	"google-gemma-2-2b-it.jinja":                          {None, false},
	"google-gemma-4-31B-it-interleaved.jinja":             {None, false},
	"google-gemma-4-31B-it.jinja":                         {None, false},
	"ibm-granite-granite-3.3-2B-Instruct.jinja":           {Granite, true},
	"ibm-granite-granite-4.0.jinja":                       {Hermes, false},
	"ibm-granite-granite-4.1.jinja":                       {Hermes, false},
	"llama-cpp-deepseek-r1.jinja":                         {DeepSeek, true},
	"llama-cpp-rwkv-world.jinja":                          {None, true},
	"meetkai-functionary-medium-v3.1.jinja":               {None, false},
	"meetkai-functionary-medium-v3.2.jinja":               {None, false},
	"meta-llama-Llama-3.1-8B-Instruct.jinja":              {Llama3, false},
	"meta-llama-Llama-3.2-3B-Instruct.jinja":              {Llama3, false},
	"meta-llama-Llama-3.3-70B-Instruct.jinja":             {Llama3, false},
	"microsoft-Phi-3.5-mini-instruct.jinja":               {None, false},
	"mistralai-Ministral-3-14B-Reasoning-2512.jinja":      {Mistral, true},
	"mistralai-Mistral-Nemo-Instruct-2407.jinja":          {Mistral, false},
	"moonshotai-Kimi-K2.jinja":                            {None, false},
	"muse-glimmer.jinja":                                  {None, false},
	"openai-gpt-oss-120b.jinja":                           {Harmony, true},
	"openbmb-MiniCPM5-1B.jinja":                           {None, true},
	"poolside-Laguna-S-2.1.jinja":                         {None, true},
	"poolside-Laguna-XS-2.1.jinja":                        {None, true},
	"poolside-Laguna-XS.2.jinja":                          {None, true},
	"tencent-Hy3.jinja":                                   {None, false},
	"unsloth-Apriel-1.5.jinja":                            {None, false},
	"unsloth-mistral-Devstral-Small-2507.jinja":           {Mistral, false},
	"upstage-Solar-Open-100B.jinja":                       {None, false},
}

func TestDetectRealTemplates(t *testing.T) {
	files, err := filepath.Glob("../chat/testdata/templates/*.jinja")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(detectWant) {
		t.Errorf("%d templates in the corpus, %d in the table: keep them in step", len(files), len(detectWant))
	}
	for _, path := range files {
		name := filepath.Base(path)
		want, ok := detectWant[name]
		if !ok {
			t.Errorf("%s: not in the table", name)
			continue
		}
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if f, thinks := Detect(string(text)); f != want.f || thinks != want.thinks {
			t.Errorf("%s: Detect = (%q, %v), want (%q, %v)", name, f, thinks, want.f, want.thinks)
		}
	}
}

func TestWants(t *testing.T) {
	cases := []struct {
		f   Format
		o   Options
		yes []string
		no  []string
	}{
		{Hermes, Options{Tools: true, Reasoning: true}, []string{"<tool_call>", "</tool_call>", "<think>", "</think>"}, []string{"<|im_end|>", "<|python_tag|>", "[TOOL_CALLS]"}},
		{Hermes, Options{}, nil, []string{"<tool_call>", "<think>"}},
		{Llama3, Options{Tools: true}, []string{"<|python_tag|>"}, []string{"<|eot_id|>", "<|eom_id|>", "<think>"}},
		{Mistral, Options{Tools: true, Reasoning: true}, []string{"[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "[THINK]", "[/THINK]"}, []string{"[INST]", "</s>"}},
		{Harmony, Options{}, []string{"<|channel|>", "<|message|>", "<|end|>", "<|call|>", "<|start|>", "<|constrain|>"}, []string{"<|endoftext|>"}},
		{Granite, Options{Tools: true}, []string{"<|tool_call|>"}, []string{"<|end_of_text|>"}},
		{DeepSeek, Options{Tools: true}, []string{dsCallsBegin, dsCallsEnd, dsCallBegin, dsCallEnd, dsSep}, []string{"<｜end▁of▁sentence｜>", "<｜Assistant｜>"}},
		{None, Options{Tools: true}, nil, []string{"<tool_call>"}},
	}
	for _, c := range cases {
		p := New(c.f, c.o)
		for _, m := range c.yes {
			if !p.Wants([]byte(m)) {
				t.Errorf("%s %+v: Wants(%q) = false", c.f, c.o, m)
			}
		}
		for _, m := range c.no {
			if p.Wants([]byte(m)) {
				t.Errorf("%s %+v: Wants(%q) = true", c.f, c.o, m)
			}
		}
	}
	for _, f := range []Format{Hermes, Qwen3Coder, SeedOSS, Llama3, Mistral, Harmony, Granite, DeepSeek} {
		if len(f.CallOpeners()) == 0 || slices.Contains(f.CallOpeners(), "") {
			t.Errorf("%s: CallOpeners %q", f, f.CallOpeners())
		}
	}
}
