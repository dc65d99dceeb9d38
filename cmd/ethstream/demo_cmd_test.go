package main

import (
	"testing"

	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/errcode"
)

func TestPresetFromFlags(t *testing.T) {
	demo, _ := chain.PresetByName("demo")
	cases := []struct {
		preset string
		days   int
		want   chain.Preset
		code   string
	}{
		{preset: "demo", want: demo},
		{preset: "demo", days: 3, want: chain.LastDaysPreset(3)},
		{preset: "seed", days: 3, want: chain.LastDaysPreset(3)},
		{preset: "nope", code: errcode.InvalidArgument},
		{preset: "demo", days: -1, code: errcode.InvalidArgument},
		{preset: "demo", days: chain.TotalDays + 1, code: errcode.InvalidArgument},
	}
	for _, c := range cases {
		got, err := presetFromFlags(c.preset, c.days)
		if c.code != "" {
			if errcode.Code(err) != c.code {
				t.Errorf("%s/%d: err = %v, want %s", c.preset, c.days, err, c.code)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s/%d: got %+v, %v; want %+v", c.preset, c.days, got, err, c.want)
		}
	}
}
