package main

import (
	"encoding/json"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"kubewasm.dev/guest"
)

// The book's envtest expectations (internal/controller/cronjob_controller_test.go)
// and the behaviours its reconciler promises, run against the harness.

const (
	name      = "test-cronjob"
	namespace = "default"
)

var (
	key     = kubewasm.Key{Namespace: namespace, Name: name}
	created = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

func cronJob(mutate ...func(*CronJob)) *CronJob {
	c := &CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: "cronjob-uid",
			CreationTimestamp: metav1.NewTime(created)},
		Spec: CronJobSpec{
			Schedule: "1 * * * *",
			JobTemplate: batchv1.JobTemplateSpec{
				Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					Containers:    []corev1.Container{{Name: "test-container", Image: "test-image"}},
					RestartPolicy: corev1.RestartPolicyOnFailure,
				}}},
			},
		},
	}
	for _, m := range mutate {
		m(c)
	}
	return c
}

// job is a Job of the CronJob scheduled at `at`, in state `state` (""
// running, or a finished condition), started at `at`.
func job(at time.Time, state batchv1.JobConditionType) *batchv1.Job {
	controller := true
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: name + "-" + at.Format("150405"), Namespace: namespace, UID: types.UID("job-" + at.Format("150405")),
			Annotations: map[string]string{scheduledTimeAnnotation: at.Format(time.RFC3339)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch.tutorial.kubebuilder.io/v1",
				Kind: "CronJob", Name: name, UID: "cronjob-uid", Controller: &controller}},
		},
		Status: batchv1.JobStatus{Active: 2, StartTime: &metav1.Time{Time: at}},
	}
	if state != "" {
		j.Status.Active = 0
		j.Status.Conditions = []batchv1.JobCondition{{Type: state, Status: corev1.ConditionTrue}}
	}
	return j
}

func reconcile(t *testing.T, now time.Time, objects ...any) *kubewasm.Outcome {
	t.Helper()
	h := kubewasm.NewHarness(Controller{})
	for _, o := range objects {
		h.Object(o)
	}
	h.Clock = now
	out, err := h.Reconcile(key)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func status(t *testing.T, out *kubewasm.Outcome) CronJobStatus {
	t.Helper()
	var c CronJob
	if err := json.Unmarshal(out.Statuses()[0], &c); err != nil {
		t.Fatal(err)
	}
	return c.Status
}

func jobsApplied(t *testing.T, out *kubewasm.Outcome) []batchv1.Job {
	t.Helper()
	var jobs []batchv1.Job
	for _, raw := range out.Applied() {
		var j batchv1.Job
		if err := json.Unmarshal(raw, &j); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, j)
	}
	return jobs
}

func deleted(out *kubewasm.Outcome) []string {
	var names []string
	for _, d := range out.Deleted() {
		names = append(names, d.Key.Name)
	}
	return names
}

// The book: "should increase CronJob Status.Active count when new Jobs are
// created".
func TestStatusActiveShouldCountTheJobsCreated(t *testing.T) {
	at := created.Add(time.Minute)
	out := reconcile(t, at.Add(time.Second), cronJob(), job(at, ""))
	active := status(t, out).Active
	if len(active) != 1 || active[0].Name != job(at, "").Name || active[0].Kind != "Job" {
		t.Errorf("active: %v", active)
	}
	if last := status(t, out).LastScheduleTime; last == nil || !last.Time.Equal(at) {
		t.Errorf("last schedule time %v", last)
	}
}

func TestAJobShouldRunAtItsScheduleOnceAndRequeueForTheNext(t *testing.T) {
	// Before the first run: nothing, requeued for it.
	out := reconcile(t, created.Add(30*time.Second), cronJob())
	if jobs := jobsApplied(t, out); len(jobs) != 0 {
		t.Errorf("early: %v", jobs)
	}
	if d, _ := out.Requeue(); d != 30*time.Second {
		t.Errorf("requeue after %v", d)
	}
	// Past it: the run's Job, named by its time, with the template's spec.
	now := created.Add(90 * time.Second)
	out = reconcile(t, now, cronJob())
	jobs := jobsApplied(t, out)
	if len(jobs) != 1 {
		t.Fatalf("jobs %v", jobs)
	}
	run := created.Add(time.Minute)
	if jobs[0].Name != "test-cronjob-1767225660" || jobs[0].Annotations[scheduledTimeAnnotation] != run.Format(time.RFC3339) ||
		jobs[0].Spec.Template.Spec.Containers[0].Image != "test-image" {
		t.Errorf("job %+v", jobs[0])
	}
	if d, _ := out.Requeue(); d != time.Hour-30*time.Second {
		t.Errorf("requeue after %v", d)
	}
	// Once it ran (its last schedule time in the status), not again.
	ran := cronJob(func(c *CronJob) { c.Status.LastScheduleTime = &metav1.Time{Time: run} })
	if jobs := jobsApplied(t, reconcile(t, now, ran, job(run, ""))); len(jobs) != 0 {
		t.Errorf("ran twice: %v", jobs)
	}
}

func TestHistoryLimitsShouldDeleteTheOldestFinishedJobs(t *testing.T) {
	limits := func(c *CronJob) {
		one, two := int32(1), int32(2)
		c.Spec.SuccessfulJobsHistoryLimit, c.Spec.FailedJobsHistoryLimit = &two, &one
	}
	hours := func(n int) time.Time { return created.Add(time.Duration(n)*time.Hour + time.Minute) }
	out := reconcile(t, hours(3).Add(time.Second), cronJob(limits),
		job(hours(0), batchv1.JobComplete), job(hours(1), batchv1.JobComplete), job(hours(2), batchv1.JobComplete),
		job(hours(0), batchv1.JobFailed), job(hours(1), batchv1.JobFailed))
	got := deleted(out)
	want := []string{job(hours(0), "").Name, job(hours(0), "").Name}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("deleted %v, want %v", got, want)
	}
}

func TestConcurrencyPoliciesShouldForbidOrReplaceARunningJob(t *testing.T) {
	run := created.Add(time.Hour + time.Minute)
	running := job(created.Add(time.Minute), "")
	now := run.Add(time.Second)
	forbid := cronJob(func(c *CronJob) { c.Spec.ConcurrencyPolicy = ForbidConcurrent })
	if jobs := jobsApplied(t, reconcile(t, now, forbid, running)); len(jobs) != 0 {
		t.Errorf("Forbid ran beside a running job: %v", jobs)
	}
	replace := cronJob(func(c *CronJob) { c.Spec.ConcurrencyPolicy = ReplaceConcurrent })
	out := reconcile(t, now, replace, running)
	if got := deleted(out); len(got) != 1 || got[0] != running.Name || len(jobsApplied(t, out)) != 1 {
		t.Errorf("Replace: deleted %v, applied %d", got, len(jobsApplied(t, out)))
	}
	if jobs := jobsApplied(t, reconcile(t, now, cronJob(), running)); len(jobs) != 1 {
		t.Errorf("Allow: %v", jobs)
	}
}

func TestASuspendedOrLateCronJobShouldRunNothing(t *testing.T) {
	suspended := cronJob(func(c *CronJob) { yes := true; c.Spec.Suspend = &yes })
	now := created.Add(90 * time.Second)
	if jobs := jobsApplied(t, reconcile(t, now, suspended)); len(jobs) != 0 {
		t.Errorf("suspended: %v", jobs)
	}
	late := cronJob(func(c *CronJob) { ten := int64(10); c.Spec.StartingDeadlineSeconds = &ten })
	if jobs := jobsApplied(t, reconcile(t, now, late)); len(jobs) != 0 {
		t.Errorf("30 s past a 10 s deadline: %v", jobs)
	}
}
