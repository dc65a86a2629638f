package reply

// granite reads <|tool_call|>[{"name":..,"arguments":{..}}, ...] (Granite 3.x).
type granite struct{ js jsonUnit }

func (*granite) openers() []string { return []string{graniteCall} }

func (g *granite) settle(opener string, body []byte, final bool) (int, []part) {
	return g.js.settle(opener, body, 0, final, nil)
}
