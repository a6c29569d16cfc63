// Command check validates Grafana dashboards against Grafana's dashboard
// schema, as an import would: each file is decoded strictly (an unknown or
// mistyped field is an error) into the Grafana Foundation SDK's dashboard
// model, with the panel and query plugins Grafana ships registered, and
// validated (grid positions, required fields, value ranges). It also checks
// what kubewasm's dashboards promise: every panel has a Prometheus query,
// and every query reads the dashboard's data source variable.
//
// Usage: check DASHBOARD.json...
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: check DASHBOARD.json...")
		os.Exit(2)
	}
	plugins.RegisterDefaultPlugins()
	failed := false
	for _, path := range os.Args[1:] {
		if err := check(path); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			failed = true
			continue
		}
		fmt.Printf("%s: valid\n", path)
	}
	if failed {
		os.Exit(1)
	}
}

func check(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var board dashboard.Dashboard
	if err := found(board.UnmarshalJSONStrict(raw)); err != nil {
		return fmt.Errorf("not a dashboard of Grafana's schema: %w", err)
	}
	if err := found(board.Validate()); err != nil {
		return fmt.Errorf("invalid: %w", err)
	}
	return queries(raw)
}

// found is err unless it is an empty list of errors: the SDK returns its
// error list typed, so a list with none is not a nil error.
func found(err error) error {
	var list cog.BuildErrors
	if errors.As(err, &list) && len(list) == 0 {
		return nil
	}
	return err
}

// panel is what check reads of a panel besides the schema.
type panel struct {
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr       string `json:"expr"`
		Datasource *struct {
			UID string `json:"uid"`
		} `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

// queries checks that every panel queries Prometheus through the
// `datasource` variable.
func queries(raw []byte) error {
	var board struct {
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(raw, &board); err != nil {
		return err
	}
	var errs []error
	var walk func([]panel)
	walk = func(panels []panel) {
		for _, p := range panels {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}" {
				errs = append(errs, fmt.Errorf("panel %q: its data source is not the Prometheus ${datasource}", p.Title))
			}
			if len(p.Targets) == 0 {
				errs = append(errs, fmt.Errorf("panel %q: no query", p.Title))
			}
			for _, t := range p.Targets {
				if t.Expr == "" {
					errs = append(errs, fmt.Errorf("panel %q: a query without an expression", p.Title))
				}
				if t.Datasource == nil || t.Datasource.UID != "${datasource}" {
					errs = append(errs, fmt.Errorf("panel %q: a query not on ${datasource}", p.Title))
				}
			}
		}
	}
	walk(board.Panels)
	return errors.Join(errs...)
}
