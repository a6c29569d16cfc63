package main

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"kubewasm.dev/guest"
)

// The CronJob of the kubebuilder book's tutorial
// (batch.tutorial.kubebuilder.io/v1), field for field.

// ConcurrencyPolicy says how to treat concurrent executions of a Job.
type ConcurrencyPolicy string

const (
	// AllowConcurrent allows CronJobs to run concurrently.
	AllowConcurrent ConcurrencyPolicy = "Allow"
	// ForbidConcurrent forbids concurrent runs, skipping the next run if
	// the previous hasn't finished yet.
	ForbidConcurrent ConcurrencyPolicy = "Forbid"
	// ReplaceConcurrent cancels the currently running job and replaces it
	// with a new one.
	ReplaceConcurrent ConcurrencyPolicy = "Replace"
)

// CronJobSpec is the desired state of a CronJob.
type CronJobSpec struct {
	// Schedule in Cron format.
	Schedule string `json:"schedule"`
	// StartingDeadlineSeconds: a job missing its scheduled time by more is
	// not started (counted as failed).
	StartingDeadlineSeconds *int64 `json:"startingDeadlineSeconds,omitempty"`
	// ConcurrencyPolicy: Allow (the default), Forbid or Replace.
	ConcurrencyPolicy ConcurrencyPolicy `json:"concurrencyPolicy,omitempty"`
	// Suspend tells the controller to suspend subsequent executions.
	Suspend *bool `json:"suspend,omitempty"`
	// JobTemplate is the job made at each execution.
	JobTemplate batchv1.JobTemplateSpec `json:"jobTemplate"`
	// SuccessfulJobsHistoryLimit: how many finished jobs to keep.
	SuccessfulJobsHistoryLimit *int32 `json:"successfulJobsHistoryLimit,omitempty"`
	// FailedJobsHistoryLimit: how many failed jobs to keep.
	FailedJobsHistoryLimit *int32 `json:"failedJobsHistoryLimit,omitempty"`
}

// CronJobStatus is the observed state of a CronJob.
type CronJobStatus struct {
	// Active lists the running jobs.
	Active []corev1.ObjectReference `json:"active,omitempty"`
	// LastScheduleTime is when the job was last successfully scheduled.
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
}

// CronJob is the Schema for the cronjobs API.
type CronJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              CronJobSpec   `json:"spec"`
	Status            CronJobStatus `json:"status,omitempty"`
}

// ResourceType is batch.tutorial.kubebuilder.io/v1 CronJob.
func (*CronJob) ResourceType() kubewasm.Type { return CronJobV1 }
