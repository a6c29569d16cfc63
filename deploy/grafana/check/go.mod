module kubewasm.dev/deploy/grafana/check

go 1.26

require github.com/grafana/grafana-foundation-sdk/go v0.0.22
