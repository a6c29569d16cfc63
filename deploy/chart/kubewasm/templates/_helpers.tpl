{{/* The name of everything the chart makes. */}}
{{- define "kubewasm.name" -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "kubewasm.labels" -}}
app.kubernetes.io/name: kubewasm
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* What selects the host's pods. */}}
{{- define "kubewasm.selector" -}}
app.kubernetes.io/name: kubewasm
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The image, by digest when one is given. */}}
{{- define "kubewasm.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}
{{- end -}}

{{/* The ServiceAccount of the host. */}}
{{- define "kubewasm.serviceAccount" -}}
{{ include "kubewasm.name" . }}
{{- end -}}
