package report

import (
	"bytes"
	"testing"
)

func TestGolden(t *testing.T) {
	tool := ToolInfo{Name: "pipec", Version: "1.2.3", InformationURI: "https://github.com/pipec/pipec"}
	for _, tc := range []struct {
		name  string
		print func(*bytes.Buffer) error
	}{
		{"text.golden", func(b *bytes.Buffer) error {
			return Text(b, fixtureDiagnostics(), fixtureSources, TextOptions{})
		}},
		{"text-color.golden", func(b *bytes.Buffer) error {
			return Text(b, fixtureDiagnostics(), fixtureSources, TextOptions{Color: true})
		}},
		{"json.golden", func(b *bytes.Buffer) error { return JSON(b, fixtureDiagnostics()) }},
		{"sarif.golden", func(b *bytes.Buffer) error { return SARIF(b, fixtureDiagnostics(), fixtureOptions(tool)) }},
		{"github.golden", func(b *bytes.Buffer) error { return GitHub(b, fixtureDiagnostics()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var first, second bytes.Buffer
			if err := tc.print(&first); err != nil {
				t.Fatal(err)
			}
			if err := tc.print(&second); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(first.Bytes(), second.Bytes()) {
				t.Fatal("two runs on identical input gave different bytes")
			}
			checkGolden(t, tc.name, first.Bytes())
		})
	}
}
