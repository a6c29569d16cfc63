// Package export_kubewasm_controller_plugin is what the component's
// exports (package wit_exports, generated) call: the plugin package
// kubewasm registers. It imports nothing of kubewasm, which imports it.
package export_kubewasm_controller_plugin

import (
	plugin "kubewasm.dev/guest/internal/wit/imports/kubewasm_controller_plugin"
	types "kubewasm.dev/guest/internal/wit/imports/kubewasm_controller_types"
	witTypes "kubewasm.dev/guest/internal/witpkg/types"
)

// Plugin is the contract's plugin interface, as the bindings type it.
type Plugin interface {
	Declare() plugin.Declaration
	Reconcile(plugin.Request) witTypes.Result[plugin.Outcome, plugin.Failure]
	Finalize(plugin.Request) witTypes.Result[plugin.Outcome, plugin.Failure]
	MapKeys(plugin.MapRequest) witTypes.Result[[]types.ObjectKey, plugin.Failure]
	Scheduled(plugin.ScheduledRequest) witTypes.Result[plugin.Outcome, plugin.Failure]
}

// Exported is the plugin the exports call, set by package kubewasm.
var Exported Plugin

// Declare is the export `declare`.
func Declare() plugin.Declaration { return Exported.Declare() }

// Reconcile is the export `reconcile`.
func Reconcile(r plugin.Request) witTypes.Result[plugin.Outcome, plugin.Failure] {
	return Exported.Reconcile(r)
}

// Finalize is the export `finalize`.
func Finalize(r plugin.Request) witTypes.Result[plugin.Outcome, plugin.Failure] {
	return Exported.Finalize(r)
}

// MapKeys is the export `map-keys`.
func MapKeys(r plugin.MapRequest) witTypes.Result[[]types.ObjectKey, plugin.Failure] {
	return Exported.MapKeys(r)
}

// Scheduled is the export `scheduled`.
func Scheduled(r plugin.ScheduledRequest) witTypes.Result[plugin.Outcome, plugin.Failure] {
	return Exported.Scheduled(r)
}
