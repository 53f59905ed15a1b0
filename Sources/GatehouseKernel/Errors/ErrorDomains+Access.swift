// Error domains of access beyond a user's session: implicit and device tokens for resource
// calls, and app-to-web single sign-on. Numbers follow the seed SDK.

/// Errors of calling a resource server with a user, implicit or device token.
public enum ResourceDomain: ErrorDomain {
    /// The domain's name, `"FetchResource"` (the seed SDK's), as diagnostics and the HTTP error
    /// body give it.
    public static let name = "FetchResource"
    /// The codes defined below, to turn a number the server sent back into its code.
    public static var knownCodes: [ResourceError.Code] {
        [.userNotAuthenticated, .userNotAuthenticatedImplicitly, .deviceNotAuthenticated, .invalidRequest]
    }
}

/// Errors of app-to-web single sign-on.
public enum AppToWebSingleSignOnDomain: ErrorDomain {
    /// The domain's name, `"AppToWebSingleSignOn"`, as diagnostics and the HTTP error body give it.
    public static let name = "AppToWebSingleSignOn"
    /// The codes defined below, to turn a number the server sent back into its code.
    public static var knownCodes: [AppToWebSingleSignOnError.Code] { [.userNotAuthenticated, .disabled] }
}

/// An error of calling a resource server with a user, implicit or device token.
public typealias ResourceError = GatehouseError<ResourceDomain>
/// An error of app-to-web single sign-on.
public typealias AppToWebSingleSignOnError = GatehouseError<AppToWebSingleSignOnDomain>

extension GatehouseError.Code where Domain == ResourceDomain {
    /// 9010: the call needs a user token, and no user is authenticated; authenticate first.
    public static var userNotAuthenticated: Self {
        Self(9010, name: "userNotAuthenticated", defaultMessage: "No user is authenticated; authenticate first.")
    }
    /// 9026: the call needs an implicit token, and no user is authenticated implicitly; call
    /// `authenticateUserImplicitly` first.
    public static var userNotAuthenticatedImplicitly: Self {
        Self(
            9026,
            name: "userNotAuthenticatedImplicitly",
            defaultMessage: "No user is authenticated implicitly; call authenticateUserImplicitly first."
        )
    }
    /// 10012: the call needs a device token, and the device is not authenticated; call
    /// `authenticateDevice` first.
    public static var deviceNotAuthenticated: Self {
        Self(
            10012,
            name: "deviceNotAuthenticated",
            defaultMessage: "The device is not authenticated; call authenticateDevice first."
        )
    }
    /// 10019: the resource request is not valid (its URL, method or headers).
    public static var invalidRequest: Self {
        Self(
            10019,
            name: "invalidRequest",
            defaultMessage: "The resource request is not valid (its URL, method or headers)."
        )
    }
}

extension GatehouseError.Code where Domain == AppToWebSingleSignOnDomain {
    /// 9010: single sign-on needs an authenticated user.
    public static var userNotAuthenticated: Self {
        Self(9010, name: "userNotAuthenticated", defaultMessage: "Single sign-on needs an authenticated user.")
    }
    /// 10023: app-to-web single sign-on is off on the server, or the target URL is not on its
    /// allowed list.
    public static var disabled: Self {
        Self(
            10023,
            name: "disabled",
            defaultMessage: "App-to-web single sign-on is off, or the target URL is not allowed."
        )
    }
}
