// The CronJob controller of the kubebuilder book's tutorial, ported to a
// kubewasm plugin: the book's reconciler step by step, its client calls
// made desired actions. For each CronJob it lists the Jobs it owns, reports
// the active ones and the last schedule time in its status, deletes the
// finished Jobs beyond the history limits, and, unless suspended, runs a Job
// for the latest missed schedule (not past the starting deadline, as the
// concurrency policy allows), requeued for the next one.
package main

import (
	"fmt"
	"sort"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"kubewasm.dev/guest"
)

// scheduledTimeAnnotation holds the time a Job was scheduled for.
const scheduledTimeAnnotation = "batch.tutorial.kubebuilder.io/scheduled-at"

// Controller is the plugin.
type Controller struct{}

func init() { kubewasm.Export(Controller{}) }

// Declare reconciles CronJobs, owning their Jobs.
func (Controller) Declare() *kubewasm.Declaration {
	return kubewasm.NewDeclaration("cronjob", "0.1.0", &CronJob{}).
		Verbs(kubewasm.ApplyStatus).
		Owns(&batchv1.Job{})
}

// Reconcile is the book's Reconcile.
func (Controller) Reconcile(ctx *kubewasm.Context) (*kubewasm.Outcome, error) {
	out := kubewasm.NewOutcome()
	log := ctx.Logger()

	// 1: Load the CronJob by name.
	var cronJob CronJob
	if err := ctx.Primary(&cronJob); err != nil {
		return nil, kubewasm.IgnoreNotFound(err)
	}

	// 2: List all active jobs, and update the status.
	var childJobs batchv1.JobList
	if err := ctx.List(&childJobs, kubewasm.InNamespace(cronJob.Namespace)); err != nil {
		return nil, err
	}
	var activeJobs, successfulJobs, failedJobs []*batchv1.Job
	var mostRecentTime *time.Time
	for i := range childJobs.Items {
		job := &childJobs.Items[i]
		if !ownedBy(job, &cronJob) {
			continue
		}
		switch _, finishedType := isJobFinished(job); finishedType {
		case "": // ongoing
			activeJobs = append(activeJobs, job)
		case batchv1.JobFailed:
			failedJobs = append(failedJobs, job)
		case batchv1.JobComplete:
			successfulJobs = append(successfulJobs, job)
		}
		scheduledTimeForJob, err := getScheduledTimeForJob(job)
		if err != nil {
			log.Error("unable to parse schedule time for child job", "job", job.Name, "error", err)
			continue
		}
		if scheduledTimeForJob != nil && (mostRecentTime == nil || mostRecentTime.Before(*scheduledTimeForJob)) {
			mostRecentTime = scheduledTimeForJob
		}
	}
	status := CronJobStatus{}
	if mostRecentTime != nil {
		status.LastScheduleTime = &metav1.Time{Time: *mostRecentTime}
	}
	for _, activeJob := range activeJobs {
		status.Active = append(status.Active, corev1.ObjectReference{
			APIVersion: "batch/v1", Kind: "Job", Name: activeJob.Name, Namespace: activeJob.Namespace,
			UID: activeJob.UID, ResourceVersion: activeJob.ResourceVersion,
		})
	}
	log.Debug("job count", "active", len(activeJobs), "successful", len(successfulJobs), "failed", len(failedJobs))
	out.ApplyStatus(&CronJob{ObjectMeta: metav1.ObjectMeta{Name: cronJob.Name, Namespace: cronJob.Namespace},
		Status: status})

	// 3: Clean up old jobs according to the history limit.
	deleteOldest(out, failedJobs, cronJob.Spec.FailedJobsHistoryLimit)
	deleteOldest(out, successfulJobs, cronJob.Spec.SuccessfulJobsHistoryLimit)

	// 4: Check if we're suspended.
	if cronJob.Spec.Suspend != nil && *cronJob.Spec.Suspend {
		log.Debug("cronjob suspended, skipping")
		return out, nil
	}

	// 5: Get the next scheduled run.
	now := ctx.Now()
	missedRun, nextRun, err := getNextSchedule(&cronJob, now)
	if err != nil {
		// Not retried until the spec changes: an unparseable schedule
		// stays one.
		log.Error("unable to figure out CronJob schedule", "error", err)
		return out, nil
	}
	out.RequeueAfter(nextRun.Sub(now))

	// 6: Run a new job if it's on schedule, not past the deadline, and not
	// blocked by our concurrency policy.
	if missedRun.IsZero() {
		return out, nil
	}
	tooLate := false
	if cronJob.Spec.StartingDeadlineSeconds != nil {
		tooLate = missedRun.Add(time.Duration(*cronJob.Spec.StartingDeadlineSeconds) * time.Second).Before(now)
	}
	if tooLate {
		log.Debug("missed starting deadline for last run, sleeping till next", "missed", missedRun)
		return out, nil
	}
	switch cronJob.Spec.ConcurrencyPolicy {
	case ForbidConcurrent:
		if len(activeJobs) > 0 {
			log.Debug("concurrency policy blocks concurrent runs, skipping", "active", len(activeJobs))
			return out, nil
		}
	case ReplaceConcurrent:
		for _, activeJob := range activeJobs {
			out.Delete(activeJob, kubewasm.Preconditions{UID: string(activeJob.UID)})
		}
	}
	return out.Apply(constructJobForCronJob(&cronJob, missedRun)), nil
}

// ownedBy reports whether cronJob is job's controller.
func ownedBy(job *batchv1.Job, cronJob *CronJob) bool {
	owner := metav1.GetControllerOf(job)
	return owner != nil && owner.Kind == "CronJob" && owner.Name == cronJob.Name &&
		(cronJob.UID == "" || owner.UID == cronJob.UID)
}

// isJobFinished: whether the job completed or failed, and which.
func isJobFinished(job *batchv1.Job) (bool, batchv1.JobConditionType) {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true, c.Type
		}
	}
	return false, ""
}

// getScheduledTimeForJob reads the time the job was scheduled for.
func getScheduledTimeForJob(job *batchv1.Job) (*time.Time, error) {
	timeRaw := job.Annotations[scheduledTimeAnnotation]
	if len(timeRaw) == 0 {
		return nil, nil
	}
	timeParsed, err := time.Parse(time.RFC3339, timeRaw)
	if err != nil {
		return nil, err
	}
	return &timeParsed, nil
}

// deleteOldest deletes the oldest of jobs beyond limit (nil: no limit).
func deleteOldest(out *kubewasm.Outcome, jobs []*batchv1.Job, limit *int32) {
	if limit == nil {
		return
	}
	sort.Slice(jobs, func(i, j int) bool {
		if jobs[i].Status.StartTime == nil {
			return jobs[j].Status.StartTime != nil
		}
		return jobs[i].Status.StartTime.Before(jobs[j].Status.StartTime)
	})
	for i, job := range jobs {
		if int32(i) >= int32(len(jobs))-*limit {
			break
		}
		out.Delete(job, kubewasm.Preconditions{UID: string(job.UID)})
	}
}

// getNextSchedule: the latest missed run (zero if none) and the next one.
func getNextSchedule(cronJob *CronJob, now time.Time) (lastMissed time.Time, next time.Time, err error) {
	sched, err := cron.ParseStandard(cronJob.Spec.Schedule)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("unparseable schedule %q: %w", cronJob.Spec.Schedule, err)
	}
	// For optimization purposes, cheat a bit and start from our last
	// observed run time.
	var earliestTime time.Time
	if cronJob.Status.LastScheduleTime != nil {
		earliestTime = cronJob.Status.LastScheduleTime.Time
	} else {
		earliestTime = cronJob.CreationTimestamp.Time
	}
	if cronJob.Spec.StartingDeadlineSeconds != nil {
		// Controller is not going to schedule anything below this point.
		schedulingDeadline := now.Add(-time.Second * time.Duration(*cronJob.Spec.StartingDeadlineSeconds))
		if schedulingDeadline.After(earliestTime) {
			earliestTime = schedulingDeadline
		}
	}
	if earliestTime.After(now) {
		return time.Time{}, sched.Next(now), nil
	}
	starts := 0
	for t := sched.Next(earliestTime); !t.After(now); t = sched.Next(t) {
		lastMissed = t
		// An object might miss several starts. For example, if the
		// controller gets wedged on Friday at 5:01pm when everyone has gone
		// home, and someone comes in on Tuesday AM and discovers the
		// problem and restarts the controller, then all the hourly jobs,
		// more than 80 of them for one hourly scheduledJob, should all
		// start running with no further intervention (if the scheduledJob
		// allows concurrency and late starts).
		starts++
		if starts > 100 {
			return time.Time{}, time.Time{}, fmt.Errorf("too many missed start times (> 100): set or decrease .spec.startingDeadlineSeconds or check clock skew")
		}
	}
	return lastMissed, sched.Next(now), nil
}

// constructJobForCronJob is the Job of cronJob scheduled for scheduledTime,
// named by it (so that a Job is made once per run), owned by the CronJob.
func constructJobForCronJob(cronJob *CronJob, scheduledTime time.Time) *batchv1.Job {
	name := fmt.Sprintf("%s-%d", cronJob.Name, scheduledTime.Unix())
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      make(map[string]string),
			Annotations: make(map[string]string),
			Name:        name,
			Namespace:   cronJob.Namespace,
		},
		Spec: *cronJob.Spec.JobTemplate.Spec.DeepCopy(),
	}
	for k, v := range cronJob.Spec.JobTemplate.Annotations {
		job.Annotations[k] = v
	}
	job.Annotations[scheduledTimeAnnotation] = scheduledTime.Format(time.RFC3339)
	for k, v := range cronJob.Spec.JobTemplate.Labels {
		job.Labels[k] = v
	}
	return job
}

func main() {}
