import Crypto
import Foundation
import GatehouseKernel
import GatehouseProtocol
import Synchronization

// Cancelling the flow an action runs from outside the action's task: the app leaves the screen,
// the process is being stopped.

extension UserClient {
    /// Cancels the flow the running action (a registration, an authentication, a PIN change, an
    /// authenticator's registration, a push request's authentication) has open at the server:
    /// the server is told `cancel` — it forgets the flow and gives back an attempt held for it —
    /// waiting for its answer at most `timeout`, and then the running call throws
    /// `GenericError.actionCancelled`, whatever its delegate is still doing (a challenge it
    /// answers later is ignored). Call it from any task, e.g. when the user leaves the screen or
    /// the app is being terminated; it returns once the server answered or the timeout passed.
    ///
    /// Nothing happens when no action runs. An action that has not opened its flow yet (its
    /// first request is on its way) cancels the flow as soon as it opens, and this returns at
    /// once. A flow that already finished is not undone: the running call returns its result.
    public nonisolated func cancelFlowInProgress(timeout: Duration = .seconds(2)) async {
        switch flows.cancel() {
        case .nothing, .requested:
            return
        case .underWay(let done):
            _ = await Self.bounded(timeout) { await done.value }
        case .open(let open, let done):
            await cancelAtServer(open.flowID, key: open.key, timeout: timeout)
            open.outcome.settle(.failure(GenericError(.actionCancelled)))
            // A delegate that heeds cancellation stops asking the user.
            open.runner.cancel()
            done.settle(())
        }
    }

    /// Runs `runner` from `start` in a task of its own, so that ``cancelFlowInProgress(timeout:)``
    /// can end the call while a delegate still waits for the user. The caller's cancellation
    /// reaches the runner, which tells the server as it always did.
    func runFlow(
        _ runner: FlowRunner,
        _ start: FlowResponse,
        profile: UserProfile?
    ) async throws -> FlowRunner.Outcome {
        // A flow that ended at once (nothing to enrol) has nothing left to cancel.
        guard start.stage != nil else { return try await runner.run(start, profile: profile) }
        let outcome = OneShot<Result<FlowRunner.Outcome, any Error>>()
        let open = flows.open(start.flowID, key: runner.key, outcome: outcome) {
            do {
                outcome.settle(.success(try await runner.run(start, profile: profile)))
            } catch {
                outcome.settle(.failure(error))
            }
        }
        guard let task = open.runner else {
            // Cancelled while the flow was being opened: cancel it now.
            await cancelAtServer(start.flowID, key: runner.key, timeout: Self.cancellationTimeout)
            open.cancellation?.settle(())
            throw GenericError(.actionCancelled)
        }
        let result = await withTaskCancellationHandler {
            await outcome.value
        } onCancel: {
            task.cancel()
        }
        let cancellation = flows.close(outcome)
        switch result {
        case .success(let finished):
            return finished
        case .failure(let error):
            guard let cancellation else { throw error }
            // Whatever the runner ran into after the flow was cancelled (the server no longer
            // knows it), the call was cancelled; it ends once the server was told.
            await cancellation.value
            throw GenericError(.actionCancelled)
        }
    }

    /// How long a flow cancelled while it opened waits for the server's answer.
    static let cancellationTimeout: Duration = .seconds(2)

    /// Tells the server to cancel the flow, waiting at most `timeout`. A flow another request
    /// moved on meanwhile (the answer the user just gave) is cancelled as it now stands.
    private nonisolated func cancelAtServer(_ flowID: String, key: P256.Signing.PrivateKey, timeout: Duration) async {
        let calls = self.calls
        _ = await Self.bounded(timeout) {
            for _ in 0..<3 {
                do {
                    let _: FlowResponse = try await calls.exchange(
                        "POST",
                        Endpoint.flow(flowID),
                        body: FlowMessageRequest(action: .cancel),
                        key: key
                    )
                    return
                } catch let refusal as ServerCalls.Refusal where refusal.status == 409 {
                    continue
                } catch {
                    // Gone already (finished, expired), or the server cannot be reached.
                    return
                }
            }
        }
    }

    /// What `operation` returns, or nil when it takes longer than `timeout` (it is then
    /// cancelled, and may still finish).
    static func bounded<T: Sendable>(
        _ timeout: Duration,
        _ operation: @escaping @Sendable () async -> T
    ) async -> T? {
        let answer = OneShot<T?>()
        let work = Task { answer.settle(await operation()) }
        let timer = Task {
            try? await Task.sleep(for: timeout)
            answer.settle(nil)
        }
        let value = await answer.value
        work.cancel()
        timer.cancel()
        return value
    }
}

/// The flow the client's running action has open, for ``UserClient/cancelFlowInProgress(timeout:)``
/// to cancel from another task. Thread-safe.
final class FlowsInProgress: Sendable {
    struct Open: Sendable {
        let flowID: String
        let key: P256.Signing.PrivateKey
        /// The task that runs the flow's stages.
        let runner: Task<Void, Never>
        /// Settled by the runner when it ends, or by a cancellation first.
        let outcome: OneShot<Result<FlowRunner.Outcome, any Error>>
    }

    /// What ``cancel()`` found to do.
    enum Cancellation {
        /// No action runs.
        case nothing
        /// The action has no flow open yet: it cancels the flow once it opens.
        case requested
        /// Another call is cancelling the flow: settled once it is done.
        case underWay(OneShot<Void>)
        /// This flow is to be cancelled; settle `done` afterwards.
        case open(Open, done: OneShot<Void>)
    }

    private struct State {
        /// Whether an action runs (between `UserClient.begin()` and `end()`).
        var acting = false
        var open: Open?
        /// Asked during the running action; settled once the flow was cancelled, or the action ended.
        var cancellation: OneShot<Void>?
        /// Whether the server is being told.
        var cancelling = false
    }

    private let state = Mutex(State())

    /// An action starts: nothing of the last one's cancellation applies to it.
    func begin() {
        let stale = state.withLock { state in
            defer { state = State(acting: true) }
            return state.cancellation
        }
        stale?.settle(())
    }

    /// The action ended: nothing is left to cancel.
    func end() {
        let pending = state.withLock { state in
            defer { state = State() }
            return state.cancellation
        }
        pending?.settle(())
    }

    /// Starts `run` for the flow `flowID`, unless the action was cancelled meanwhile: then the
    /// runner is nil, and the caller cancels the flow and settles the cancellation.
    func open(
        _ flowID: String,
        key: P256.Signing.PrivateKey,
        outcome: OneShot<Result<FlowRunner.Outcome, any Error>>,
        run: @escaping @Sendable () async -> Void
    ) -> (runner: Task<Void, Never>?, cancellation: OneShot<Void>?) {
        state.withLock { state in
            if let cancellation = state.cancellation {
                state.cancelling = true
                return (nil, cancellation)
            }
            let runner = Task(operation: run)
            state.open = Open(flowID: flowID, key: key, runner: runner, outcome: outcome)
            return (runner, nil)
        }
    }

    /// The flow of `outcome` ended; returns the cancellation asked meanwhile, if any.
    func close(_ outcome: OneShot<Result<FlowRunner.Outcome, any Error>>) -> OneShot<Void>? {
        state.withLock { state in
            if state.open?.outcome === outcome { state.open = nil }
            return state.cancellation
        }
    }

    /// Marks the running action cancelled; returns what is left to do.
    func cancel() -> Cancellation {
        state.withLock { state in
            if let cancellation = state.cancellation { return state.cancelling ? .underWay(cancellation) : .requested }
            guard state.acting || state.open != nil else { return .nothing }
            let done = OneShot<Void>()
            state.cancellation = done
            guard let open = state.open else { return .requested }
            state.open = nil
            state.cancelling = true
            return .open(open, done: done)
        }
    }
}

/// A value that the first of several parties settles; any number of tasks wait for it, without
/// polling. Later settlements are ignored.
final class OneShot<Value: Sendable>: Sendable {
    private enum State {
        case waiting([CheckedContinuation<Value, Never>])
        case settled(Value)
    }

    private let state = Mutex(State.waiting([]))

    /// Settles the value unless it was settled already; resumes every waiter.
    func settle(_ value: Value) {
        let waiters = state.withLock { state -> [CheckedContinuation<Value, Never>] in
            guard case .waiting(let waiters) = state else { return [] }
            state = .settled(value)
            return waiters
        }
        for waiter in waiters { waiter.resume(returning: value) }
    }

    /// The value, once settled.
    var value: Value {
        get async {
            await withCheckedContinuation { continuation in
                let settled = state.withLock { state -> Value? in
                    switch state {
                    case .settled(let value):
                        return value
                    case .waiting(let waiters):
                        state = .waiting(waiters + [continuation])
                        return nil
                    }
                }
                if let settled { continuation.resume(returning: settled) }
            }
        }
    }
}
