package kubewasm

// The host's rules for names, labels and label selectors, for the native
// Harness: the same rules as the host's kubewasm_core::validation and
// kubewasm_core::selector, held to the same answers by the shared
// conformance fixtures (tests/conformance).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

var (
	dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	namePart = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
)

func isDNSLabel(s string) bool { return len(s) <= 63 && dnsLabel.MatchString(s) }

func isDNSSubdomain(s string) bool {
	if len(s) > 253 {
		return false
	}
	for _, part := range strings.Split(s, ".") {
		if !isDNSLabel(part) {
			return false
		}
	}
	return true
}

// The rules' texts, as the host words them (kubewasm_core::validation::Rule).
var rules = map[string]string{
	"dns-label": "must be a DNS label: at most 63 lowercase letters, digits or '-', starting and ending with a " +
		"letter or digit",
	"dns-subdomain": "must be a DNS subdomain: at most 253 lowercase letters, digits, '-' or '.', starting and " +
		"ending with a letter or digit",
	"path-segment": "must be a path segment name: printable ASCII, not empty, '.' or '..', without '/' or '%', at " +
		"most 253 characters",
	"label-key": "must be an optional DNS subdomain and '/', then at most 63 letters, digits, '-', '_' or '.', " +
		"starting and ending with a letter or digit",
	"label-value": "must be empty or at most 63 letters, digits, '-', '_' or '.', starting and ending with a " +
		"letter or digit",
	"label-string": "must be a string",
}

// nameRule is the rule names of t follow, as a Kubernetes 1.37 server
// checks them (kubewasm_core::validation::kind_name_rule).
func nameRule(t Type) string {
	switch {
	case t.Group == "" && (t.Kind == "Namespace" || t.Kind == "Service"),
		t.Group == "apps" && t.Kind == "StatefulSet":
		return "dns-label"
	case t.Group == "rbac.authorization.k8s.io", t.Group == "policy" && t.Kind == "PodDisruptionBudget":
		return "path-segment"
	default:
		return "dns-subdomain"
	}
}

func isValidName(t Type, name string) bool {
	switch nameRule(t) {
	case "dns-label":
		return isDNSLabel(name)
	case "path-segment":
		if name == "" || len(name) > 253 || name == "." || name == ".." {
			return false
		}
		for _, c := range name {
			if c < 33 || c > 126 || c == '/' || c == '%' {
				return false
			}
		}
		return true
	default:
		return isDNSSubdomain(name)
	}
}

func invalid(what, value, rule string) error {
	if len(value) > 80 {
		value = value[:80]
	}
	return fmt.Errorf("invalid %s `%s`: %s", what, value, rules[rule])
}

func nameError(t Type, name string) error {
	if isValidName(t, name) {
		return nil
	}
	return invalid("name", name, nameRule(t))
}

func namespaceError(namespace string) error {
	if isDNSLabel(namespace) {
		return nil
	}
	return invalid("namespace", namespace, "dns-label")
}

func isLabelKey(key string) bool {
	if prefix, name, found := strings.Cut(key, "/"); found {
		return prefix != "" && isDNSSubdomain(prefix) && len(name) <= 63 && namePart.MatchString(name)
	}
	return len(key) <= 63 && namePart.MatchString(key)
}

func isLabelValue(value string) bool {
	return value == "" || (len(value) <= 63 && namePart.MatchString(value))
}

// labelsError is the host's refusal of the first invalid label of the
// object (its labels in their JSON order), if any.
func labelsError(object map[string]json.RawMessage) error {
	var meta struct {
		Labels json.RawMessage `json:"labels"`
	}
	if raw, ok := object["metadata"]; !ok || json.Unmarshal(raw, &meta) != nil || len(meta.Labels) == 0 {
		return nil
	}
	decoder := json.NewDecoder(strings.NewReader(string(meta.Labels)))
	if token, err := decoder.Token(); err != nil || token != json.Delim('{') {
		return nil
	}
	for decoder.More() {
		token, err := decoder.Token()
		if err != nil {
			return nil
		}
		key, _ := token.(string)
		var value json.RawMessage
		if err := decoder.Decode(&value); err != nil {
			return nil
		}
		if !isLabelKey(key) {
			return invalid("label key", key, "label-key")
		}
		if string(value) == "null" {
			continue
		}
		var text string
		if json.Unmarshal(value, &text) != nil {
			return invalid("label value", compact(value), "label-string")
		}
		if !isLabelValue(text) {
			return invalid("label value", text, "label-value")
		}
	}
	return nil
}

func compact(raw json.RawMessage) string {
	var out bytes.Buffer
	if err := json.Compact(&out, raw); err != nil {
		return string(raw)
	}
	return out.String()
}

// requirement is one term of a label selector.
type requirement struct {
	op     string
	key    string
	values []string
}

// parseSelector parses the API server's selector grammar; the host's
// refusal where it refuses.
func parseSelector(selector string) ([]requirement, error) {
	fail := func(reason string) error {
		return fmt.Errorf("invalid label selector `%s`: %s", selector, reason)
	}
	var clauses []string
	depth, start := 0, 0
	for i, c := range selector {
		switch c {
		case '(':
			depth++
		case ')':
			if depth == 0 {
				return nil, fail("unbalanced `)`")
			}
			depth--
		case ',':
			if depth == 0 {
				clauses = append(clauses, selector[start:i])
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, fail("unbalanced `(`")
	}
	clauses = append(clauses, selector[start:])
	var requirements []requirement
	for _, clause := range clauses {
		clause = strings.TrimSpace(clause)
		if clause == "" {
			if strings.TrimSpace(selector) == "" {
				continue
			}
			return nil, fail("empty requirement")
		}
		r, err := parseRequirement(clause, fail)
		if err != nil {
			return nil, err
		}
		requirements = append(requirements, r)
	}
	return requirements, nil
}

func parseRequirement(clause string, fail func(string) error) (requirement, error) {
	key := func(k string) (string, error) {
		if !isLabelKey(k) {
			return "", fail(fmt.Sprintf("invalid label key `%s`", k))
		}
		return k, nil
	}
	value := func(v string) (string, error) {
		if !isLabelValue(v) {
			return "", fail(fmt.Sprintf("invalid label value `%s`", v))
		}
		return v, nil
	}
	pair := func(op, k, v string) (requirement, error) {
		k, err := key(strings.TrimSpace(k))
		if err != nil {
			return requirement{}, err
		}
		v, err = value(strings.TrimSpace(v))
		if err != nil {
			return requirement{}, err
		}
		return requirement{op: op, key: k, values: []string{v}}, nil
	}
	if rest, ok := strings.CutPrefix(clause, "!"); ok {
		k, err := key(strings.TrimSpace(rest))
		return requirement{op: "!", key: k}, err
	}
	if k, v, ok := strings.Cut(clause, "!="); ok {
		return pair("!=", k, v)
	}
	if k, v, ok := strings.Cut(clause, "=="); ok {
		return pair("=", k, v)
	}
	if k, v, ok := strings.Cut(clause, "="); ok {
		return pair("=", k, v)
	}
	words := strings.Fields(clause)
	k, err := key(words[0])
	if err != nil {
		return requirement{}, err
	}
	if len(words) == 1 {
		return requirement{op: "exists", key: k}, nil
	}
	rest := strings.TrimSpace(strings.TrimPrefix(clause, words[0]))
	var op, set string
	switch {
	case strings.HasPrefix(rest, "notin"):
		op, set = "notin", strings.TrimSpace(rest[len("notin"):])
	case strings.HasPrefix(rest, "in"):
		op, set = "in", strings.TrimSpace(rest[len("in"):])
	default:
		return requirement{}, fail(fmt.Sprintf("unknown operator in `%s`", clause))
	}
	if !strings.HasPrefix(set, "(") || !strings.HasSuffix(set, ")") {
		return requirement{}, fail(fmt.Sprintf("expected a parenthesised set of values in `%s`", clause))
	}
	var values []string
	for _, v := range strings.Split(set[1:len(set)-1], ",") {
		v, err := value(strings.TrimSpace(v))
		if err != nil {
			return requirement{}, err
		}
		values = append(values, v)
	}
	return requirement{op: op, key: k, values: values}, nil
}

// matches reports whether labels satisfy every requirement.
func matches(requirements []requirement, labels map[string]string) bool {
	for _, r := range requirements {
		value, has := labels[r.key]
		var ok bool
		switch r.op {
		case "=":
			ok = has && value == r.values[0]
		case "!=":
			ok = !has || value != r.values[0]
		case "in":
			ok = has && slices.Contains(r.values, value)
		case "notin":
			ok = !has || !slices.Contains(r.values, value)
		case "exists":
			ok = has
		case "!":
			ok = !has
		}
		if !ok {
			return false
		}
	}
	return true
}
