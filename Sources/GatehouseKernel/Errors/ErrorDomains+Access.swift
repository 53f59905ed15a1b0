// Error domains of access beyond a user's session: implicit and device tokens for resource
// calls, and app-to-web single sign-on. Numbers follow the seed SDK.

/// Errors of calling a resource server with a user, implicit or device token.
public enum ResourceDomain: ErrorDomain {
    public static let name = "FetchResource"
    public static var knownCodes: [ResourceError.Code] {
        [.userNotAuthenticated, .userNotAuthenticatedImplicitly, .deviceNotAuthenticated, .invalidRequest]
    }
}

/// Errors of app-to-web single sign-on.
public enum AppToWebSingleSignOnDomain: ErrorDomain {
    public static let name = "AppToWebSingleSignOn"
    public static var knownCodes: [AppToWebSingleSignOnError.Code] { [.userNotAuthenticated, .disabled] }
}

public typealias ResourceError = GatehouseError<ResourceDomain>
public typealias AppToWebSingleSignOnError = GatehouseError<AppToWebSingleSignOnDomain>

extension GatehouseError.Code where Domain == ResourceDomain {
    public static var userNotAuthenticated: Self {
        Self(9010, name: "userNotAuthenticated", defaultMessage: "No user is authenticated; authenticate first.")
    }
    public static var userNotAuthenticatedImplicitly: Self {
        Self(
            9026,
            name: "userNotAuthenticatedImplicitly",
            defaultMessage: "No user is authenticated implicitly; call authenticateUserImplicitly first."
        )
    }
    public static var deviceNotAuthenticated: Self {
        Self(
            10012,
            name: "deviceNotAuthenticated",
            defaultMessage: "The device is not authenticated; call authenticateDevice first."
        )
    }
    public static var invalidRequest: Self {
        Self(
            10019,
            name: "invalidRequest",
            defaultMessage: "The resource request is not valid (its URL, method or headers)."
        )
    }
}

extension GatehouseError.Code where Domain == AppToWebSingleSignOnDomain {
    public static var userNotAuthenticated: Self {
        Self(9010, name: "userNotAuthenticated", defaultMessage: "Single sign-on needs an authenticated user.")
    }
    public static var disabled: Self {
        Self(
            10023,
            name: "disabled",
            defaultMessage: "App-to-web single sign-on is off, or the target URL is not allowed."
        )
    }
}
